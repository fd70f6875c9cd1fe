// Flame graph of a {name, value, children} tree, drawn as SVG the way flamegraph.pl draws one: a rectangle per
// frame, its width proportional to its bytes, the root at the bottom and callees above their callers, each
// label clipped to its frame. Click a frame to zoom to it (it fills the width; its ancestors stay, at full
// width); click the root or "reset zoom" to unzoom. The search box takes a regular expression: matching frames
// are highlighted and their share of all bytes is shown (a match under a matching frame is not counted twice).
// Names come from the traced program: they are set as text (textContent), never as markup.
(function () {
  "use strict";
  const SVGNS = "http://www.w3.org/2000/svg";
  const CELL = 18;           // frame height, px
  const CHAR_W = 12 * 0.62;  // width of one character of the 12px monospace labels, with a margin
  const PAD = 3;             // label inset, px
  const MIN_W = 1;           // frames narrower than this (px) are not drawn: a million stacks stay a usable page

  function svg(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  // flamegraph.pl's "hot" palette, the shade picked from the name: a function keeps its colour between reports.
  function colour(name) {
    let h = 2166136261;
    for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
    h >>>= 0;
    const a = (h & 0xff) / 255, b = ((h >>> 8) & 0xff) / 255, c = ((h >>> 16) & 0xff) / 255;
    return `rgb(${205 + Math.round(50 * a)},${Math.round(230 * b)},${Math.round(55 * c)})`;
  }

  // The tree laid out: every frame with bytes, its offset from the root's left edge in bytes, and its depth.
  // Children are sorted by name, as flamegraph.pl merges them.
  function layout(tree) {
    const nodes = [];
    function walk(n, parent, depth, x0) {
      const node = { name: String(n.name), value: Number(n.value), parent, depth, x0, kids: [] };
      nodes.push(node);
      const kids = (n.children || []).filter(k => Number(k.value) > 0)
        .sort((p, q) => (p.name < q.name ? -1 : p.name > q.name ? 1 : 0));
      let x = x0;
      for (const k of kids) {
        node.kids.push(walk(k, node, depth + 1, x));
        x += Number(k.value);
      }
      return node;
    }
    return { root: walk(tree, null, 0, 0), nodes };
  }

  function label(name, width) {
    const fit = Math.floor((width - 2 * PAD) / CHAR_W);
    if (fit < 3) return "";
    return name.length <= fit ? name : name.slice(0, fit - 2) + "..";
  }

  // Draws the tree into el; opts: width (px), format (bytes to text). Returns {zoom(name path), reset, search}.
  function draw(el, tree, opts) {
    const W = opts.width, fmt = opts.format || String;
    if (!tree || !(Number(tree.value) > 0)) {
      el.textContent = "(no data)";
      return null;
    }
    const { root, nodes } = layout(tree);
    const maxDepth = nodes.reduce((m, n) => Math.max(m, n.depth), 0);
    const H = (maxDepth + 1) * CELL;
    const pct = v => (100 * v / root.value).toFixed(1) + "%";

    const bar = document.createElement("div");
    bar.className = "flame-bar";
    const input = document.createElement("input");
    input.type = "search";
    input.id = "flame-search";
    input.placeholder = "search: regular expression";
    input.setAttribute("aria-label", "search frames (regular expression)");
    const reset = document.createElement("button");
    reset.type = "button";
    reset.id = "flame-reset";
    reset.textContent = "reset zoom";
    reset.disabled = true;
    const matched = document.createElement("span");
    matched.id = "flame-matched";
    bar.append(input, reset, matched);

    const root_svg = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" });
    const details = document.createElement("div");
    details.className = "details";
    details.textContent = " ";
    el.replaceChildren(bar, root_svg, details);

    let zoomed = root;
    // A frame's elements are made when it is first shown: an import can leave 50,000 frames under 1 px.
    function element(n) {
      const y = H - (n.depth + 1) * CELL;
      n.g = svg("g", { class: "frame", "data-depth": n.depth });
      const title = svg("title", {});
      title.textContent = `${n.name}: ${fmt(n.value)} (${pct(n.value)})`;
      n.rect = svg("rect", { y: y, height: CELL - 1, rx: 2, ry: 2, fill: colour(n.name) });
      n.text = svg("text", { y: y + CELL - 5 });
      n.g.append(title, n.rect, n.text);
      n.g.classList.toggle("match", !!n.match);
      n.g.addEventListener("click", () => (n === root ? unzoom() : zoom(n)));
      n.g.addEventListener("mouseenter", () => { details.textContent = title.textContent; });
      n.g.addEventListener("mouseleave", () => { details.textContent = " "; });
      root_svg.appendChild(n.g);
    }

    // Geometry for the zoomed frame z: its subtree scaled to the full width, its ancestors full width, others hidden.
    function place() {
      const z = zoomed, scale = W / z.value;
      const inside = new Set();
      (function mark(n) { inside.add(n); n.kids.forEach(mark); })(z);
      for (let p = z.parent; p; p = p.parent) inside.add(p);
      for (const n of nodes) {
        let x = 0, w = W;
        if (n.depth > z.depth && inside.has(n)) {
          x = (n.x0 - z.x0) * scale;
          w = n.value * scale;
        }
        const shown = inside.has(n) && w >= MIN_W;
        if (!shown) {
          if (n.g) n.g.style.display = "none";
          continue;
        }
        if (!n.g) element(n);
        n.g.style.display = "";
        n.g.classList.toggle("parent", n.depth < z.depth);
        n.rect.setAttribute("x", x.toFixed(2));
        n.rect.setAttribute("width", w.toFixed(2));
        n.text.setAttribute("x", (x + PAD).toFixed(2));
        n.text.textContent = label(n.name, w);
      }
      reset.disabled = z === root;
    }
    function zoom(n) {
      zoomed = n;
      place();
    }
    function unzoom() {
      zoomed = root;
      place();
    }
    function search(term) {
      let re = null;
      matched.className = "";
      matched.textContent = "";
      if (term) {
        try {
          re = new RegExp(term);
        } catch (e) {
          matched.className = "bad";
          matched.textContent = "invalid regular expression";
        }
      }
      let bytes = 0, count = 0;
      (function walk(n, under) {
        const hit = re !== null && re.test(n.name);
        n.match = hit;
        if (n.g) n.g.classList.toggle("match", hit);
        if (hit) count++;
        if (hit && !under) bytes += n.value;
        n.kids.forEach(k => walk(k, under || hit));
      })(root, false);
      if (re) matched.textContent = `matched: ${pct(bytes)} (${count} ${count === 1 ? "frame" : "frames"})`;
    }
    input.addEventListener("input", () => search(input.value));
    reset.addEventListener("click", unzoom);
    place();
    return { zoom, reset: unzoom, search };
  }

  window.MemleakFlame = { draw };
})();
