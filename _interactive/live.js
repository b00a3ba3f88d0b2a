/* "Run live": the page's code cells run on the reader's own Jupyter server (Thebe, offline).
 *
 * `make serve` starts a Jupyter server on 127.0.0.1 with a fresh token and prints an address of
 * the form http://127.0.0.1:PORT/...html#jupyter=<server url>&token=<token>. This script reads the
 * server and token from that fragment once, keeps them in sessionStorage (this tab, this origin)
 * and removes them from the address bar; they are never part of the book's HTML. A click on the
 * button loads the vendored Thebe 0.9.3 (_static/thebe/, no CDN, MathJax off), turns the code
 * cells into editable cells and connects them to the server's kernel. Without a server the button
 * says, in one sentence, how to start one.
 */
(function () {
  "use strict";
  var KEY = "transformer-intro-live";
  var HOWTO = "To run this page's code here, run `make serve` in the book's folder and open " +
    "the address it prints.";
  var me = document.currentScript ? document.currentScript.src : "";
  var STATIC = me.replace(/live\.js(\?.*)?$/, "");

  // `make serve`'s Jupyter server listens on this machine only: 127.0.0.0/8, localhost, [::1].
  // An address elsewhere, from a crafted link, never receives the token.
  function isLoopbackHost(hostname) {
    return hostname === "localhost" || hostname === "[::1]" ||
      /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
  }

  function isLoopbackServer(url) {
    try {
      var u = new URL(url);
      return (u.protocol === "http:" || u.protocol === "https:") && isLoopbackHost(u.hostname);
    } catch (e) { return false; }
  }

  var refused = null;  // a non-loopback address from the fragment, named on the button

  function readConfig() {
    var params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    var url = params.get("jupyter"), token = params.get("token");
    if (url && token) {
      // keep the token out of the address bar, history and copied links
      history.replaceState(null, "", window.location.pathname + window.location.search);
      if (!isLoopbackServer(url)) {
        refused = url;
        try { sessionStorage.removeItem(KEY); } catch (e) {}
        return null;
      }
      try { sessionStorage.setItem(KEY, JSON.stringify({url: url, token: token})); } catch (e) {}
      return {url: url, token: token};
    }
    var stored = null;
    try { stored = JSON.parse(sessionStorage.getItem(KEY) || "null"); } catch (e) {}
    return stored && isLoopbackServer(stored.url) ? stored : null;
  }

  function isLocal(url) {
    try {
      var u = new URL(url, window.location.href);
      return u.protocol === "data:" || u.protocol === "blob:" || u.origin === window.location.origin ||
        isLoopbackHost(u.hostname);
    } catch (e) { return false; }
  }

  // Thebe would fetch require.js (for widgets) from a CDN: refuse every non-local request.
  function guardFetch() {
    if (window.fetch && !window.fetch.tiGuarded) {
      var original = window.fetch.bind(window);
      var guarded = function (resource, init) {
        var url = typeof resource === "string" ? resource : (resource && resource.url) || String(resource);
        if (!isLocal(url)) return Promise.reject(new Error("offline book: refused " + url));
        return original(resource, init);
      };
      guarded.tiGuarded = true;
      window.fetch = guarded;
    }
  }

  function prepareCells() {
    // Thebe pairs the n-th [data-executable] with the n-th [data-output]: give every code cell
    // exactly one output element, in page order.
    document.querySelectorAll("div.cell").forEach(function (cell) {
      var pre = cell.querySelector(".cell_input pre");
      if (!pre) return;
      pre.setAttribute("data-executable", "true");
      pre.setAttribute("data-language", "python");
      var output = cell.querySelector(".cell_output");
      if (!output) {
        output = document.createElement("div");
        output.className = "cell_output docutils container";
        cell.appendChild(output);
      }
      output.setAttribute("data-output", "");
    });
    document.querySelectorAll("button.copybtn").forEach(function (b) { b.remove(); });
  }

  function setText(button, text, howto) {
    button.querySelector(".ti-live-text").textContent = text;
    button.classList.toggle("ti-live-howto", !!howto);
  }

  function start(button, config) {
    guardFetch();  // before the first request, not only before Thebe's
    setText(button, "Connecting to the local server\u2026");
    var base = config.url.replace(/\/?$/, "/");
    fetch(base + "api/status", {headers: {Authorization: "token " + config.token}})
      .then(function (r) { if (!r.ok) throw new Error(r.status); })
      .then(function () { load(button, base, config.token); },
            function () {
              setText(button, "No live server answered at " + base + ". " + HOWTO, true);
              button.disabled = false;
            });
  }

  function load(button, base, token) {
    guardFetch();
    var css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = STATIC + "thebe/thebe.css";
    document.head.appendChild(css);
    var script = document.createElement("script");
    script.src = STATIC + "thebe/index.js";
    script.onerror = function () { setText(button, "Could not load _static/thebe/index.js.", true); };
    script.onload = function () {
      prepareCells();
      var thebe = window.thebe;
      thebe.on("status", function (event, data) {
        // short, in the header; the full message goes to the console
        if (!/fail|error/i.test(data.status)) setText(button, "Live: " + data.status);
        else setText(button, "Live code failed (" + data.status + "). " + HOWTO, true);
        if (window.console) console.debug("live: " + data.status + " " + (data.message || ""));
      });
      thebe.bootstrap({
        useBinder: false,
        useJupyterLite: false,
        requestKernel: true,
        mountActivateWidget: false,
        mountStatusWidget: false,
        mathjaxUrl: false,
        serverSettings: {baseUrl: base, wsUrl: base.replace(/^http/, "ws"), token: token,
                         appendToken: true},
        kernelOptions: {name: "python3", path: "book"},
        codeMirrorConfig: {mode: "python", theme: "default"},
      }).then(function (result) {
        var ok = result && result.session;
        setText(button, ok ? "Live: connected (run the cells in order)" :
          "The server gave no kernel. " + HOWTO, !ok);
        button.title = ok ? "Cells run on the Jupyter server at " + base : HOWTO;
        document.documentElement.setAttribute("data-live-status", ok ? "connected" : "failed");
      }, function (error) {
        setText(button, "Live code failed: " + error + ". " + HOWTO, true);
        document.documentElement.setAttribute("data-live-status", "failed");
      });
    };
    document.head.appendChild(script);
  }

  function addButton() {
    var config = readConfig();  // also on pages without code: later pages find it stored
    if (!document.querySelector("div.cell .cell_input pre")) return;  // no code on this page
    var button = document.createElement("button");
    button.type = "button";
    button.className = "btn btn-sm ti-live-button";
    button.title = config ? "Run this page's code on the local Jupyter server" : HOWTO;
    button.innerHTML = '<span class="ti-live-icon" aria-hidden="true">\u25b6</span> ' +
      '<span class="ti-live-text">Run live</span>';
    button.addEventListener("click", function () {
      if (button.disabled) return;
      var current = readConfig();
      if (!current && refused) {
        setText(button, "Refused the server " + refused + ": it is not a loopback address " +
          "(127.0.0.1, localhost). " + HOWTO, true);
        return;
      }
      if (!current || window.location.protocol === "file:") {
        setText(button, HOWTO, true);
        return;
      }
      button.disabled = true;
      start(button, current);
    });
    var bar = document.querySelector(".article-header-buttons");
    if (bar) bar.insertBefore(button, bar.firstChild);
    else (document.querySelector("main") || document.body).prepend(button);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", addButton);
  else addButton();
})();
