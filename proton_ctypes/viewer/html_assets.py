"""CSS and JavaScript of the HTML report (kept as Python strings so the package needs no data files).

The script reads the JSON inlined in ``<script id="profile-data" type="application/json">`` and builds:
an icicle (flame) graph sized by the first metric (click a frame to zoom, the top bar to zoom out), a
tooltip with every metric of the hovered frame, and a table sortable by clicking its headers.  When it has
rendered everything it sets ``document.body.dataset.ok = "1"``; any script error sets
``document.body.dataset.error`` (tests read both from the DOM).
"""

CSS = r"""
body { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 16px; color: #1d1d1f; }
h1 { font-size: 18px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 18px 0 6px; }
#summary { color: #555; } .legend span { display: inline-block; padding: 0 6px; margin-right: 6px; }
#flame { position: relative; width: 100%; border: 1px solid #ddd; overflow: hidden; background: #fafafa; }
.frame { position: absolute; height: 17px; box-sizing: border-box; border: 1px solid #fff;
         font-size: 11px; line-height: 15px; padding: 0 3px; overflow: hidden; white-space: nowrap;
         text-overflow: ellipsis; cursor: pointer; }
.frame:hover { border-color: #000; }
.frame.new { border: 1px dashed #a00; } .frame.gone { opacity: 0.55; text-decoration: line-through; }
#tooltip { position: fixed; z-index: 10; max-width: 640px; background: #fffffe; border: 1px solid #888;
           box-shadow: 0 2px 8px rgba(0,0,0,.2); padding: 6px 8px; font-size: 12px; pointer-events: none; }
#tooltip table td { padding: 0 6px 0 0; } #tooltip .path { color: #666; word-break: break-all; }
table.data { border-collapse: collapse; font-variant-numeric: tabular-nums; }
table.data th { position: sticky; top: 0; background: #eee; cursor: pointer; user-select: none;
                padding: 3px 8px; text-align: right; }
table.data th:first-child, table.data td:first-child { text-align: left; }
table.data td { padding: 1px 8px; text-align: right; border-bottom: 1px solid #f0f0f0; }
table.data tr:hover td { background: #f3f7ff; }
.pos { color: #b00; } .neg { color: #070; } .status-new { color: #b00; } .status-gone { color: #777; }
#note { color: #777; }
"""

SCRIPT = r"""
window.onerror = function (message, source, line) {
  document.body.dataset.error = String(message) + " (line " + line + ")";
};
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("profile-data").textContent);
  var nodes = data.nodes, diff = data.mode === "diff", cols = data.columns;
  var MAX_ROWS = 20000, ROW_H = 18;
  var kids = nodes.map(function () { return []; });
  nodes.forEach(function (n) { if (n.parent >= 0) kids[n.parent].push(n.id); });

  function num(v) {
    if (v === null || v === undefined) return NaN;
    return v === "inf" ? Infinity : (v === "-inf" ? -Infinity : v);
  }
  function fmt(v) { v = num(v); return isNaN(v) ? "nan" : (isFinite(v) ? v.toFixed(3) : (v > 0 ? "inf" : "-inf")); }
  function signed(v) { v = num(v); return isNaN(v) ? "nan" : (v > 0 || (v === 0 && 1 / v > 0) ? "+" : "") + fmt(v); }
  function pct(v) { v = num(v); return isNaN(v) ? "nan" : signed(v) + "%"; }
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) {
    return {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;"}[c]; }); }
  function sizeOf(n) {
    var v = diff ? Math.max(num(n.base[0]), num(n.new[0])) : num(n.values[0]);
    return (isNaN(v) || v < 0) ? 0 : v;
  }
  // Layout size: a node is at least as wide as its children together (handles exclusive metrics).
  var span = new Array(nodes.length);
  for (var i = nodes.length - 1; i >= 0; i--) {
    var s = 0; kids[i].forEach(function (k) { s += span[k]; });
    span[i] = Math.max(sizeOf(nodes[i]), s);
  }
  function colour(n) {
    if (!diff) {
      var h = 0; for (var i = 0; i < n.name.length; i++) h = (h * 31 + n.name.charCodeAt(i)) >>> 0;
      return "hsl(" + (10 + h % 45) + "," + (65 + h % 25) + "%," + (62 + h % 14) + "%)";
    }
    if (n.status === "new") return "hsl(0,85%,72%)";
    if (n.status === "gone") return "hsl(0,0%,80%)";
    var p = num(n.pct[0]);
    if (isNaN(p) || p === 0) return "hsl(0,0%,88%)";
    var t = Math.min(1, Math.abs(p) / 50);
    return p > 0 ? "hsl(0,80%," + (92 - 30 * t) + "%)" : "hsl(130,55%," + (92 - 30 * t) + "%)";
  }
  function pathOf(id) { var p = []; while (id >= 0) { p.unshift(nodes[id].name); id = nodes[id].parent; } return p; }

  var tip = document.getElementById("tooltip");
  function metricRows(n) {
    return cols.map(function (c, k) {
      if (!diff) return "<tr><td>" + esc(c) + "</td><td>" + fmt(n.values[k]) + "</td></tr>";
      return "<tr><td>" + esc(c) + "</td><td>base " + fmt(n.base[k]) + "</td><td>new " + fmt(n.new[k]) +
        "</td><td>\u0394 " + signed(n.delta[k]) + "</td><td>" + pct(n.pct[k]) + "</td></tr>";
    }).join("");
  }
  function rawRows(n) {
    var keys = n.raw ? Object.keys(n.raw) : [];
    if (!keys.length) return "";
    return "<div class=\"path\">in the file:</div><table>" + keys.map(function (k) {
      return "<tr><td>" + esc(k) + "</td><td>" + esc(n.raw[k]) + "</td></tr>"; }).join("") + "</table>";
  }
  function showTip(ev, n) {
    tip.innerHTML = "<b>" + esc(n.name) + "</b>" + (diff && n.status !== "both" ? " [" + n.status + "]" : "") +
      "<div class=\"path\">" + esc(pathOf(n.id).join(" / ")) + "</div><table>" + metricRows(n) + "</table>" +
      rawRows(n);
    tip.hidden = false;
    var x = Math.min(ev.clientX + 12, window.innerWidth - tip.offsetWidth - 8);
    tip.style.left = Math.max(0, x) + "px"; tip.style.top = (ev.clientY + 14) + "px";
  }
  function hideTip() { tip.hidden = true; }

  var flame = document.getElementById("flame");
  function drawFlame(focus) {
    flame.textContent = "";
    var chain = []; for (var a = nodes[focus].parent; a >= 0; a = nodes[a].parent) chain.unshift(a);
    var depth0 = chain.length, maxDepth = depth0, total = span[focus] || 1;
    chain.forEach(function (id, d) { place(id, 0, 100, d); });
    (function walk(id, left, d) {
      var width = span[id] / total * 100;
      if (width < 0.05 && id !== focus) return;
      place(id, left, width, d); maxDepth = Math.max(maxDepth, d);
      var x = left;
      kids[id].forEach(function (k) { walk(k, x, d + 1); x += span[k] / total * 100; });
    })(focus, 0, depth0);
    flame.style.height = ((maxDepth + 1) * ROW_H + 2) + "px";
  }
  function place(id, left, width, d) {
    var n = nodes[id], el = document.createElement("div");
    el.className = "frame" + (diff && n.status !== "both" ? " " + n.status : "");
    el.style.left = left + "%"; el.style.width = width + "%"; el.style.top = (d * ROW_H) + "px";
    el.style.background = colour(n); el.textContent = n.name; el.dataset.node = id;
    el.onmousemove = function (ev) { showTip(ev, n); }; el.onmouseleave = hideTip;
    el.onclick = function () { drawFlame(id); };
    flame.appendChild(el);
  }

  var headers = [{label: "name", get: function (n) { return n.name; }, text: true}];
  if (diff) headers.push({label: "status", get: function (n) { return n.status; }, text: true});
  cols.forEach(function (c, k) {
    if (!diff) { headers.push({label: c, get: function (n) { return num(n.values[k]); }, show: fmt}); return; }
    headers.push({label: c + " base", get: function (n) { return num(n.base[k]); }, show: fmt});
    headers.push({label: c + " new", get: function (n) { return num(n.new[k]); }, show: fmt});
    headers.push({label: c + " \u0394", get: function (n) { return num(n.delta[k]); }, show: signed, sign: true});
    headers.push({label: c + " \u0394%", get: function (n) { return num(n.pct[k]); }, show: pct, sign: true});
  });
  var table = document.getElementById("table"), order = nodes.map(function (n) { return n.id; });
  var sortKey = -1, sortDir = 1;
  function drawTable() {
    var head = "<tr>" + headers.map(function (h, i) {
      return "<th data-col=\"" + i + "\">" + esc(h.label) + (i === sortKey ? (sortDir > 0 ? " \u25b2" : " \u25bc") : "") + "</th>";
    }).join("") + "</tr>";
    var rows = order.slice(0, MAX_ROWS).map(function (id) {
      var n = nodes[id];
      return "<tr data-node=\"" + id + "\">" + headers.map(function (h, i) {
        var v = h.get(n);
        if (h.text) {
          var pad = i === 0 ? "padding-left:" + (8 + 10 * n.depth) + "px" : "";
          return "<td class=\"" + (i === 1 ? "status-" + v : "") + "\" style=\"" + pad + "\" title=\"" +
            esc(pathOf(id).join(" / ")) + "\">" + esc(v) + "</td>";
        }
        var cls = h.sign && v > 0 ? "pos" : (h.sign && v < 0 ? "neg" : "");
        return "<td class=\"" + cls + "\">" + h.show(v) + "</td>";
      }).join("") + "</tr>";
    }).join("");
    table.innerHTML = "<thead>" + head + "</thead><tbody>" + rows + "</tbody>";
    document.getElementById("note").textContent = order.length > MAX_ROWS ?
      "showing " + MAX_ROWS + " of " + order.length + " rows" : order.length + " rows";
  }
  table.addEventListener("click", function (ev) {
    var th = ev.target.closest("th"); if (!th) return;
    var col = +th.dataset.col, h = headers[col];
    sortDir = (col === sortKey) ? -sortDir : (h.text ? 1 : -1); sortKey = col;
    order.sort(function (x, y) {
      var a = h.get(nodes[x]), b = h.get(nodes[y]);
      if (h.text) return sortDir * (a < b ? -1 : (a > b ? 1 : 0)) || x - y;
      if (h.sign) { a = Math.abs(a); b = Math.abs(b); }
      var an = isNaN(a), bn = isNaN(b);
      if (an || bn) return (an - bn) || x - y;
      return sortDir * (a - b) || x - y;
    });
    drawTable();
  });
  table.addEventListener("mousemove", function (ev) {
    var tr = ev.target.closest("tr[data-node]"); if (tr) showTip(ev, nodes[+tr.dataset.node]); else hideTip();
  });
  table.addEventListener("mouseleave", hideTip);

  var summary = document.getElementById("summary");
  summary.textContent = nodes.length + " frames; metrics: " + cols.join(", ") +
    (diff ? "; new = " + data.labels.new + ", base = " + data.labels.base : "");
  drawFlame(0);
  drawTable();
  document.body.dataset.ok = "1";
})();
"""
