/* jfchart: a tiny dependency-free SVG line chart for the Jetfleet dashboard (Apache-2.0).
 *
 * Every element with class "jf-chart" holds a <script type="application/json"> child:
 *   {"title": "...", "unit": "ms", "lines": [{"name": "p99", "points": [[epoch_ms, value], ...]}]}
 * The chart is drawn in place as an <svg class="jf-svg">; the element gets data-rendered="true".
 * Vendored on purpose: control rooms and gateways are often offline, so no CDN.
 */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var COLORS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2"];
  var W = 520, H = 180, L = 56, R = 10, T = 24, B = 26;

  function el(name, attrs, text) {
    var node = document.createElementNS(NS, name);
    for (var k in attrs) { node.setAttribute(k, attrs[k]); }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function fmt(v) {
    var a = Math.abs(v);
    if (a >= 1e9) { return (v / 1e9).toFixed(1) + "G"; }
    if (a >= 1e6) { return (v / 1e6).toFixed(1) + "M"; }
    if (a >= 1e4) { return (v / 1e3).toFixed(0) + "k"; }
    if (a >= 100) { return v.toFixed(0); }
    return v.toFixed(a >= 10 ? 1 : 2);
  }

  function clock(ms) {
    var d = new Date(ms);
    function two(n) { return (n < 10 ? "0" : "") + n; }
    return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  }

  function draw(box) {
    var source = box.querySelector("script[type='application/json']");
    if (!source) { return; }
    var spec = JSON.parse(source.textContent);
    var lines = (spec.lines || []).filter(function (l) { return l.points && l.points.length; });
    var svg = el("svg", { "class": "jf-svg", viewBox: "0 0 " + W + " " + H, role: "img",
                          "aria-label": spec.title || "chart" });
    svg.appendChild(el("text", { x: L, y: 15, "class": "jf-title" },
                       (spec.title || "") + (spec.unit ? " (" + spec.unit + ")" : "")));
    if (!lines.length) {
      svg.appendChild(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", "class": "jf-empty" },
                         "no data in this range"));
      box.appendChild(svg);
      box.setAttribute("data-rendered", "empty");
      return;
    }
    var xs = [], ys = [];
    lines.forEach(function (l) { l.points.forEach(function (p) { xs.push(p[0]); ys.push(p[1]); }); });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min(0, Math.min.apply(null, ys)), y1 = Math.max.apply(null, ys);
    if (x1 === x0) { x0 -= 1000; x1 += 1000; }
    if (y1 === y0) { y1 = y0 + 1; }
    function sx(x) { return L + (x - x0) / (x1 - x0) * (W - L - R); }
    function sy(y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); }
    for (var i = 0; i <= 4; i++) {
      var yv = y0 + (y1 - y0) * i / 4, yy = sy(yv);
      svg.appendChild(el("line", { x1: L, x2: W - R, y1: yy, y2: yy, "class": "jf-grid" }));
      svg.appendChild(el("text", { x: L - 4, y: yy + 4, "text-anchor": "end", "class": "jf-tick" }, fmt(yv)));
    }
    svg.appendChild(el("text", { x: L, y: H - 8, "class": "jf-tick" }, clock(x0)));
    svg.appendChild(el("text", { x: W - R, y: H - 8, "text-anchor": "end", "class": "jf-tick" }, clock(x1)));
    lines.forEach(function (l, n) {
      var color = COLORS[n % COLORS.length];
      var pts = l.points.map(function (p) { return sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1); });
      svg.appendChild(el("polyline", { points: pts.join(" "), fill: "none", stroke: color,
                                       "stroke-width": 1.6, "class": "jf-line",
                                       "data-name": l.name }));
      if (l.points.length === 1) {
        svg.appendChild(el("circle", { cx: sx(l.points[0][0]), cy: sy(l.points[0][1]), r: 2.5, fill: color }));
      }
      svg.appendChild(el("text", { x: W - R - 90 * (lines.length - n), y: 15, fill: color,
                                   "class": "jf-legend" }, l.name));
    });
    box.appendChild(svg);
    box.setAttribute("data-rendered", "true");
  }

  function drawAll() {
    var boxes = document.querySelectorAll(".jf-chart");
    for (var i = 0; i < boxes.length; i++) { draw(boxes[i]); }
  }

  window.jfchart = { draw: draw, drawAll: drawAll };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
