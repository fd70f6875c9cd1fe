/* C++ symbol names as people read them. */
#ifndef ML_DEMANGLE_H
#define ML_DEMANGLE_H

/*
 * Demangle a C++ symbol name ("_ZN3foo3barEi" -> "foo::bar(int)"), ignoring any "@VERSION"
 * suffix. Returns a malloc'd string, or NULL with errno EINVAL when raw is not a mangled name
 * (or does not demangle), ENOMEM on allocation failure.
 */
char *ml_demangle(const char *raw);

#endif
