/* `memleak-ai diff A [B]`: what changed between two reports of memleak-ai's own output. */
#ifndef ML_DIFFCMD_H
#define ML_DIFFCMD_H

/* Run the command on argv (argv[0] is "diff"); the exit status: 0, 1 when a gate failed, 2 on an error. */
int diffcmd__main(int argc, char **argv);

#endif
