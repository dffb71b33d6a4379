// The viewer's only script: sort and filter tables, tick two runs, compare two runs. No build step.
"use strict";
function cellValue(td, numeric) {
  const v = td.dataset.v !== undefined ? td.dataset.v : td.textContent.trim();
  if (!numeric) return v.toLowerCase();
  const x = parseFloat(v);
  return isNaN(x) ? -Infinity : x;
}
function makeSortable(table) {
  table.querySelectorAll("thead th").forEach((th, i) => {
    th.addEventListener("click", () => {
      const numeric = th.dataset.type === "num";
      const dir = th.dataset.dir === "asc" ? "desc" : "asc";
      table.querySelectorAll("thead th").forEach(o => delete o.dataset.dir);
      th.dataset.dir = dir;
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      rows.sort((a, b) => {
        const x = cellValue(a.cells[i], numeric), y = cellValue(b.cells[i], numeric);
        return (x < y ? -1 : x > y ? 1 : 0) * (dir === "asc" ? 1 : -1);
      });
      rows.forEach(r => body.appendChild(r));
    });
  });
}
function applyFilters(table) {
  const text = (document.querySelector(`[data-filter-text="#${table.id}"]`) || {}).value || "";
  const sel = document.querySelector(`[data-target="#${table.id}"]`);
  const radio = document.querySelector(table.id === "problems" ? 'input[name="pf"]:checked' : "#none");
  for (const row of table.tBodies[0].rows) {
    let show = !text || row.textContent.toLowerCase().includes(text.toLowerCase());
    if (sel && sel.value) show = show && row.dataset[sel.dataset.filterCol] === sel.value;
    if (radio && radio.value) show = show && row.dataset[radio.value] === "1";
    row.hidden = !show;
  }
}
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("table.sortable").forEach(makeSortable);
  document.querySelectorAll("[data-filter-text], [data-target], input[name=pf]").forEach(el => {
    const t = document.querySelector(el.dataset.filterText || el.dataset.target || "#problems");
    if (t) el.addEventListener("input", () => applyFilters(t));
  });
  const btn = document.getElementById("compare-btn");
  if (btn) {
    let order = [];  // the ticked runs in the order they were ticked: the first is A
    const picks = () => order;
    document.querySelectorAll("input.pick").forEach(x => x.addEventListener("change", () => {
      order = order.filter(v => v !== x.value);
      if (x.checked) order.push(x.value);
      btn.disabled = order.length !== 2;
    }));
    btn.addEventListener("click", () => {
      const [a, b] = picks();
      location.href = `compare.html?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`;
    });
  }
});
function loadRun(id) {  // a <script> file, not fetch(): the export opens from file:// too
  return new Promise((resolve, reject) => {
    if (window.VIEWER_RUNS && window.VIEWER_RUNS[id]) return resolve(window.VIEWER_RUNS[id]);
    const s = document.createElement("script");
    s.src = `runs/${encodeURIComponent(id)}/problems.js`;
    s.onload = () => resolve(window.VIEWER_RUNS[id]);
    s.onerror = () => reject(new Error(`cannot load run ${id}`));
    document.head.appendChild(s);
  });
}
function outcome(a, b, graded) {
  // graded: either run scores between 0 and 1 (F1, RACE): higher / lower, never "right" or "wrong"
  if (!a || !b) return "only in " + (a ? "A" : "B");
  if (a.status === "error" || b.status === "error") return "error";
  if (graded) {
    if (a.score > b.score) return "a-higher";
    if (b.score > a.score) return "b-higher";
    return "same-score";
  }
  if (a.right && b.wrong) return "a-right-b-wrong";
  if (a.wrong && b.right) return "a-wrong-b-right";
  if (a.wrong && b.wrong) return "both-wrong";
  return "both-right";
}
const BETTER = {"a-right-b-wrong": "a", "a-higher": "a", "a-wrong-b-right": "b", "b-higher": "b"};
function viewerCompare() {
  const params = new URLSearchParams(location.search);
  const selA = document.getElementById("run-a"), selB = document.getElementById("run-b");
  if (params.get("a")) selA.value = params.get("a");
  if (params.get("b")) selB.value = params.get("b");
  const body = document.querySelector("#compare tbody");
  async function render() {
    body.innerHTML = "";
    if (!selA.value || !selB.value) return;
    const [A, B] = await Promise.all([loadRun(selA.value), loadRun(selB.value)]);
    const byB = new Map(B.rows.map(r => [r.id, r]));
    const ids = A.rows.map(r => r.id).concat(B.rows.map(r => r.id).filter(id => !A.rows.some(r => r.id === id)));
    const byA = new Map(A.rows.map(r => [r.id, r]));
    const counts = {};
    const graded = Boolean(A.run.graded || B.run.graded);
    document.querySelectorAll("[data-binary-only]").forEach(el => { el.hidden = graded; });
    for (const id of ids) {
      const a = byA.get(id), b = byB.get(id);
      const o = outcome(a, b, graded);
      counts[o] = (counts[o] || 0) + 1;
      const tr = document.createElement("tr");
      tr.dataset.outcome = o;
      tr.dataset.better = BETTER[o] || "";
      tr.dataset.differ = (a && b && a.score !== b.score) ? "1" : "0";
      const cell = (run, r, what) => {
        const td = document.createElement("td");
        if (!r) { td.textContent = "—"; return td; }
        if (what === "answer") {
          const link = document.createElement("a");
          link.href = `runs/${encodeURIComponent(run)}/p/${r.page}`;
          link.textContent = r.status === "error" ? "error" : String(r.extracted ?? "—");
          td.appendChild(link);
        } else {
          td.textContent = r.status !== "ok" || r.score === null || r.score === undefined ? "—"
            : Number(r.score).toFixed(2);   // an error is not scored (its recorded 0 is no score)
          td.dataset.v = r.score ?? "";
          td.className = r.right ? "good" : r.wrong ? "bad" : "";
        }
        return td;
      };
      const idTd = document.createElement("td"); idTd.textContent = id; tr.appendChild(idTd);
      tr.append(cell(selA.value, a, "answer"), cell(selA.value, a, "score"), cell(selB.value, b, "answer"),
                cell(selB.value, b, "score"));
      const gold = document.createElement("td"); gold.textContent = String((a || b).gold ?? "—"); tr.appendChild(gold);
      const out = document.createElement("td"); out.textContent = o.replace(/-/g, " "); tr.appendChild(out);
      body.appendChild(tr);
    }
    document.getElementById("compare-summary").textContent = Object.entries(counts)
      .map(([k, v]) => `${k.replace(/-/g, " ")}: ${v}`).join(" · ");
    filter();
  }
  function filter() {
    const f = document.querySelector('input[name="cf"]:checked').value;
    for (const tr of body.rows) {
      tr.hidden = f === "differ" ? tr.dataset.differ !== "1"
        : f === "a-better" || f === "b-better" ? tr.dataset.better !== f[0]
        : (f !== "" && tr.dataset.outcome !== f);
    }
  }
  selA.addEventListener("change", render);
  selB.addEventListener("change", render);
  document.querySelectorAll('input[name="cf"]').forEach(x => x.addEventListener("change", filter));
  render();
}
