// The dashboard's own script: a "select all" box for lists of checkboxes. Everything else
// is htmx (live pieces) or plain forms, which work without any script.
document.addEventListener("change", (event) => {
  const box = event.target;
  if (!(box instanceof HTMLInputElement) || !box.dataset.selectAll) return;
  const form = box.closest("form");
  if (!form) return;
  for (const other of form.querySelectorAll(`input[type=checkbox][name="${box.dataset.selectAll}"]`)) {
    other.checked = box.checked;
  }
});

// A live table that only grows (the journal's tail) keeps its newest rows: older ones are
// dropped so a page left open all day stays light.
const KEEP = 500;
document.addEventListener("htmx:afterSwap", (event) => {
  const table = event.target;
  if (!(table instanceof HTMLElement) || !table.dataset.keep) return;
  const keep = Number(table.dataset.keep) || KEEP;
  for (const empty of table.querySelectorAll("tr.empty")) empty.remove();  // "No entries."
  while (table.rows && table.rows.length > keep) table.deleteRow(-1);
});
