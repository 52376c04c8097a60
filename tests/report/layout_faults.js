// Every layout fault of the page as a readable string (tests/report/test_html_chromium.py).
// A "token" is a run of non-space, non-hyphen characters, with a leading sign kept when it
// starts a chunk (so "-0.125" is one token): a long name may wrap at its own hyphens, but no
// token may span two lines.
(() => {
  const faults = [], tol = 0.5, seen = {svgText: 0, cells: 0, tokens: 0}, scrolling = [];
  const num = v => v.toFixed(1);
  const box = r => `x ${num(r.left)}..${num(r.right)}, y ${num(r.top)}..${num(r.bottom)}`;
  const inside = (r, outer) => r.left >= outer.left - tol && r.right <= outer.right + tol &&
                               r.top >= outer.top - tol && r.bottom <= outer.bottom + tol;
  const root = document.documentElement, page = root.clientWidth;
  if (root.scrollWidth > page) faults.push(`page scrolls sideways: ${root.scrollWidth} > ${page}`);

  for (const svg of document.querySelectorAll('svg')) {
    const name = svg.getAttribute('aria-label'), chart = svg.getBoundingClientRect();
    const vb = svg.viewBox.baseVal;
    const view = {left: vb.x, right: vb.x + vb.width, top: vb.y, bottom: vb.y + vb.height};
    if (chart.right > page + tol) faults.push(`chart ${name} is wider than the page`);
    for (const t of svg.querySelectorAll('text')) {
      seen.svgText++;
      const b = t.getBBox();
      const user = {left: b.x, right: b.x + b.width, top: b.y, bottom: b.y + b.height};
      if (!inside(user, view))
        faults.push(`${name}: "${t.textContent}" outside the viewBox (${box(user)}; ${box(view)})`);
      const drawn = t.getBoundingClientRect();
      if (!inside(drawn, chart))
        faults.push(`${name}: "${t.textContent}" drawn outside the chart (${box(drawn)}; ${box(chart)})`);
    }
  }

  for (const cell of document.querySelectorAll('td, th')) {
    seen.cells++;
    if (cell.scrollWidth > cell.clientWidth || cell.scrollHeight > cell.clientHeight)
      faults.push(`cell "${cell.textContent}" overflows: ${cell.scrollWidth}x${cell.scrollHeight}` +
                  ` > ${cell.clientWidth}x${cell.clientHeight}`);
  }
  // A table whose unbreakable content (a sha256 digest) is wider than the page must scroll
  // inside its wrapper: reachable, not cut off.
  for (const wrap of document.querySelectorAll('div.table')) {
    if (wrap.scrollWidth <= wrap.clientWidth) continue;
    const head = wrap.querySelector('th').textContent;
    scrolling.push(head);
    if (!['auto', 'scroll'].includes(getComputedStyle(wrap).overflowX))
      faults.push(`table "${head}" cut off: ${wrap.scrollWidth} > ${wrap.clientWidth}`);
  }

  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const token = /(?:(?<![^\s\[(])[+\-])?[^\s\-]+/g;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest('svg, title, style')) continue;  // SVG text never wraps
    for (const m of node.data.matchAll(token)) {
      seen.tokens++;
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0)
                            .map(r => Math.round(r.top)));
      if (lines.size > 1)
        faults.push(`"${m[0]}" broken across ${lines.size} lines (in "${node.data}")`);
    }
  }
  return {faults, seen, scrolling};
})()
