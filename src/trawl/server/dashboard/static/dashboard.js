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
