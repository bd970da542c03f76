// faultlens UI: the little behaviour the pages need, no framework.
document.addEventListener("DOMContentLoaded", () => {
  // Changing the status filter applies it at once.
  const status = document.getElementById("filter-status");
  if (status) status.addEventListener("change", () => status.form.submit());

  // Whole rows of the runs table open the run.
  document.querySelectorAll("tr.run").forEach((row) => {
    row.addEventListener("click", (event) => {
      if (event.target.closest("a")) return;
      window.location.href = "/runs/" + encodeURIComponent(row.dataset.run);
    });
  });

  // While attribution is queued or running, poll the API and reload when it is done.
  const box = document.getElementById("attribution");
  if (box && box.dataset.pending) {
    const id = window.location.pathname.split("/").pop();
    const poll = async () => {
      try {
        const response = await fetch("/api/runs/" + id + "/attribution", { credentials: "same-origin" });
        const body = await response.json();
        if (!body.job || !["waiting", "queued", "running"].includes(body.job.state)) { window.location.reload(); return; }
      } catch (e) { /* the server may be restarting: keep polling */ }
      setTimeout(poll, 1500);
    };
    setTimeout(poll, 1500);
  }

  // Open on the blamed step when there is one and no other anchor was asked for.
  const blamed = document.querySelector(".step.blamed");
  if (blamed && !window.location.hash) blamed.scrollIntoView({ block: "center" });
});
