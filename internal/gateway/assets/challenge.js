// guardian's proof-of-work page: find a nonce whose SHA-256 over the signed
// challenge and the nonce has the asked leading zero bits, post it, then
// repeat the request that was challenged. No resource from another origin.
"use strict";
(async function () {
  const el = document.getElementById("guardian-challenge");
  const status = document.getElementById("status");
  const token = el.dataset.token;
  const bits = parseInt(el.dataset.difficulty, 10);
  const enc = new TextEncoder();
  function zeros(h) {
    let n = 0;
    for (const b of h) {
      if (b === 0) { n += 8; continue; }
      return n + Math.clz32(b) - 24;
    }
    return n;
  }
  let nonce = 0;
  for (;;) {
    const h = new Uint8Array(await crypto.subtle.digest("SHA-256", enc.encode(token + ":" + nonce)));
    if (zeros(h) >= bits) break;
    nonce++;
  }
  const r = await fetch(el.dataset.url, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "Accept": "application/json" },
    body: JSON.stringify({ token: token, nonce: String(nonce) }),
  });
  if (!r.ok) {
    status.textContent = "The check did not go through. Reload the page to try again.";
    return;
  }
  document.body.dataset.solved = "true";
  if (el.dataset.method === "GET" || el.dataset.method === "HEAD") {
    status.textContent = "Done. Loading…";
    location.reload();
    return;
  }
  // guardian keeps no copy of the form (it holds the password): the
  // browser goes back to it, and the next submission goes ahead.
  status.textContent = "Done. Taking you back: submit the form again to sign in.";
  history.back();
})();
