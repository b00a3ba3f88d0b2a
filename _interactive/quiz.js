/* Self-check questions at the end of each chapter (no dependencies, works offline and from file://).
 *
 * A chapter asks for its questions with a placeholder,
 *     <div class="book-quiz" data-quiz="02_attention"></div>
 * and this script, loaded once per page after quizzes.js (which sets window.BOOK_QUIZZES),
 * replaces the placeholder's content by the questions of that key. Two kinds of question:
 *   choice:  buttons, one per option, in an order drawn from the question's text
 *            (displayOrder below), so the stored order is not what a reader sees; pressing
 *            one marks it right or wrong and shows that option's own explanation (every
 *            option has one, so a reader may try them all);
 *   numeric: a text field and a Check button (or Enter); an answer within `tolerance` of
 *            `answer` is right, one near a listed common mistake gets that mistake's
 *            explanation, any other number gets the question's hint; after a wrong answer a
 *            button shows the answer.
 * Feedback goes to an aria-live region per question. Question and explanation strings hold
 * a little inline HTML (<i>, <sub>, <sup>, <code>, <b>, <em>) and no TeX, so they need no
 * MathJax. Without JavaScript the placeholder keeps whatever it holds; quiz.css writes a line
 * of its own into an empty one.
 * Markers for tests (tests/browser/test_quiz.py): every rendered question has data-index and
 * data-type; an option button has data-option (the option's stored index, not its place on
 * the page) and, once pressed, data-state ("right" or "wrong"); the feedback has data-option
 * (or data-verdict for numeric answers).
 */
(function () {
  "use strict";

  var ALLOWED = {I: 1, SUB: 1, SUP: 1, CODE: 1, B: 1, EM: 1, BR: 1};

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // The strings are the book's own, but build the DOM from a parsed copy that keeps only the
  // tags listed above (as text content otherwise), so a slip in quizzes.js cannot inject markup.
  function setRich(node, html) {
    var tpl = document.createElement("template");
    tpl.innerHTML = html;
    (function copy(from, to) {
      Array.prototype.forEach.call(from.childNodes, function (child) {
        if (child.nodeType === 3) {
          to.appendChild(document.createTextNode(child.nodeValue));
        } else if (child.nodeType === 1 && ALLOWED[child.tagName]) {
          var c = document.createElement(child.tagName.toLowerCase());
          copy(child, c);
          to.appendChild(c);
        } else if (child.nodeType === 1) {
          copy(child, to);
        }
      });
    })(tpl.content, node);
    return node;
  }

  function rich(tag, cls, html) { return setRich(el(tag, cls), html); }

  // "0.25", "-3", "1e-3", "1/4", "1,536", "1 536" -> number; anything else -> NaN.
  function parseNumber(text) {
    var s = String(text).trim().replace(/[\s\u00a0\u202f_]/g, "").replace(/\u2212/g, "-");
    if (/^[-+]?\d{1,3}(,\d{3})+(\.\d*)?$/.test(s)) s = s.replace(/,/g, "");
    var frac = /^([-+]?\d+(?:\.\d*)?)\/(\d+(?:\.\d*)?)$/.exec(s);
    if (frac) return Number(frac[1]) / Number(frac[2]);
    if (!/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(s)) return NaN;
    return Number(s);
  }

  // The order the options are shown in, drawn from the question's text: a Fisher-Yates shuffle
  // driven by Mulberry32 seeded with the 32-bit FNV-1a hash of the text's UTF-16 code units.
  // Integer arithmetic only, so the order is the same in every browser, on every visit, and in
  // Python (transformer_intro.exercises.quiz.display_order, which the tests compare with this).
  // Entry k is the stored index of the option shown k-th.
  function questionSeed(text) {
    var h = 0x811c9dc5;
    for (var i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h >>> 0;
  }

  function mulberry32(seed) {
    var state = seed >>> 0;
    return function () {
      state = (state + 0x6d2b79f5) >>> 0;
      var t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  function displayOrder(text, count) {
    var order = [], draw = mulberry32(questionSeed(text));
    for (var k = 0; k < count; k++) order.push(k);
    for (var i = count - 1; i > 0; i--) {
      var j = Math.floor(draw() * (i + 1)), swap = order[i];
      order[i] = order[j];
      order[j] = swap;
    }
    return order;
  }

  function near(x, value, tolerance) {
    var tol = tolerance !== undefined ? tolerance : 1e-9 * Math.max(1, Math.abs(value));
    return Math.abs(x - value) <= tol;
  }

  function feedback(box, verdictText, cls, html) {
    box.textContent = "";
    box.className = "bq-feedback " + cls;
    box.appendChild(el("strong", "bq-verdict", verdictText));
    box.appendChild(document.createTextNode(" "));
    box.appendChild(rich("span", "bq-explanation", html));
  }

  function choiceQuestion(item, q, qid) {
    var group = el("div", "bq-options");
    group.setAttribute("role", "group");
    group.setAttribute("aria-labelledby", qid);
    var box = el("div", "bq-feedback");
    box.setAttribute("aria-live", "polite");
    box.id = qid + "-feedback";
    displayOrder(q.question, q.options.length).forEach(function (i) {
      var option = q.options[i];
      var b = el("button", "bq-option");
      b.type = "button";
      b.setAttribute("data-option", String(i));
      b.setAttribute("aria-pressed", "false");
      b.setAttribute("aria-controls", box.id);
      var mark = el("span", "bq-mark");
      mark.setAttribute("aria-hidden", "true");
      b.appendChild(mark);
      b.appendChild(rich("span", "bq-option-text", option.text));
      var state = el("span", "bq-sr");
      b.appendChild(state);
      b.addEventListener("click", function () {
        var right = !!option.correct;
        Array.prototype.forEach.call(group.querySelectorAll(".bq-option"), function (o) {
          o.setAttribute("aria-pressed", "false");
        });
        b.setAttribute("aria-pressed", "true");
        b.setAttribute("data-state", right ? "right" : "wrong");
        mark.textContent = right ? "\u2713" : "\u2717";
        state.textContent = right ? " (right)" : " (wrong)";
        feedback(box, right ? "Right." : "Not quite.", right ? "bq-right" : "bq-wrong",
                 option.explanation);
        box.setAttribute("data-option", String(i));
        if (right) item.setAttribute("data-solved", "");
      });
      group.appendChild(b);
    });
    item.appendChild(group);
    item.appendChild(box);
  }

  function numericQuestion(item, q, qid) {
    var row = el("div", "bq-numeric");
    var label = el("label", "bq-label", "Your answer");
    var input = el("input", "bq-input");
    input.type = "text";
    input.id = qid + "-input";
    input.setAttribute("inputmode", "decimal");
    input.setAttribute("autocomplete", "off");
    input.setAttribute("spellcheck", "false");
    input.setAttribute("aria-describedby", qid);
    label.htmlFor = input.id;
    var check = el("button", "bq-check", "Check");
    check.type = "button";
    var reveal = el("button", "bq-reveal", "Show the answer");
    reveal.type = "button";
    reveal.hidden = true;
    row.appendChild(label);
    row.appendChild(input);
    if (q.unit) row.appendChild(el("span", "bq-unit", q.unit));
    row.appendChild(check);
    row.appendChild(reveal);
    var box = el("div", "bq-feedback");
    box.setAttribute("aria-live", "polite");
    box.id = qid + "-feedback";
    input.setAttribute("aria-controls", box.id);

    function run() {
      var x = parseNumber(input.value);
      box.removeAttribute("data-verdict");
      if (!isFinite(x)) {
        box.className = "bq-feedback bq-invalid";
        box.textContent = "Type a number, for example 16, 0.25, 1/4 or 1e-3.";
        box.setAttribute("data-verdict", "invalid");
        return;
      }
      if (near(x, q.answer, q.tolerance)) {
        feedback(box, "Right.", "bq-right", q.explanation);
        box.setAttribute("data-verdict", "right");
        item.setAttribute("data-solved", "");
        reveal.hidden = true;
        return;
      }
      var known = (q.mistakes || []).filter(function (m) {
        return near(x, m.value, m.tolerance !== undefined ? m.tolerance : q.tolerance);
      })[0];
      feedback(box, "Not quite.", "bq-wrong", known ? known.explanation : q.hint);
      box.setAttribute("data-verdict", known ? "mistake" : "wrong");
      reveal.hidden = false;
    }
    check.addEventListener("click", run);
    input.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter") { ev.preventDefault(); run(); }
    });
    reveal.addEventListener("click", function () {
      feedback(box, "The answer is " + (q.answer_text || String(q.answer)) + ".", "bq-shown",
               q.explanation);
      box.setAttribute("data-verdict", "shown");
      reveal.hidden = true;
      input.focus();
    });
    item.appendChild(row);
    item.appendChild(box);
  }

  function render(root) {
    var name = root.getAttribute("data-quiz");
    var questions = (window.BOOK_QUIZZES || {})[name];
    if (!questions || !questions.length) {
      root.setAttribute("data-quiz-missing", "");
      return;  // keep the placeholder's own content
    }
    root.textContent = "";
    root.setAttribute("data-quiz-ready", "");
    var intro = el("p", "bq-intro",
      questions.length + " questions. Pick an option, or type a number, to see why it is right " +
      "or wrong; every option has its own explanation, so try the others too.");
    root.appendChild(intro);
    var list = el("ol", "bq-list");
    questions.forEach(function (q, i) {
      var qid = "bq-" + name.replace(/[^A-Za-z0-9_-]/g, "") + "-" + i;
      var item = el("li", "bq-question");
      item.setAttribute("data-index", String(i));
      item.setAttribute("data-type", q.type);
      var prompt = rich("p", "bq-prompt", q.question);
      prompt.id = qid;
      item.appendChild(prompt);
      if (q.type === "numeric") numericQuestion(item, q, qid);
      else choiceQuestion(item, q, qid);
      list.appendChild(item);
    });
    root.appendChild(list);
  }

  function init() {
    Array.prototype.forEach.call(
      document.querySelectorAll("div.book-quiz[data-quiz]:not([data-quiz-ready])"), render);
  }

  window.BookQuiz = {init: init, parseNumber: parseNumber, displayOrder: displayOrder};
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
