// The task explorer of report.html (evals/report_explorer.py embeds this file and the data).
// Plain browser JavaScript, no library, nothing fetched: the report opens offline.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var tasks = data.tasks;
  var root = document.getElementById("explorer-root");
  var OUTCOME_TEXT = {
    passed: "passed",
    wrong: "wrong answer",
    no_answer: "no answer",
    setup: "setup failure",
    not_scored: "not scored",
  };
  var FAILED = { wrong: 1, no_answer: 1, setup: 1 };
  var SCORERS = ["ex", "spider2", "spider2-strict", "rex"];
  var state = { outcome: "all", db: "all", stage: "all", q: "" };

  function esc(value) {
    return String(value == null ? "" : value)
      .replace(/&/g, "&amp;")
      .replace(/</g, "&lt;")
      .replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;");
  }
  function stageText(stage) {
    return (data.stage_text && data.stage_text[stage]) || stage;
  }
  function count(list, key) {
    var out = {};
    list.forEach(function (t) {
      var k = key(t);
      if (k !== null && k !== undefined && k !== "") out[k] = (out[k] || 0) + 1;
    });
    return out;
  }
  function options(values, counts, labels, all) {
    return (
      '<option value="all">' + esc(all) + " (" + tasks.length + ")</option>" +
      values
        .map(function (v) {
          return '<option value="' + esc(v) + '">' + esc(labels ? labels(v) : v) + " (" + (counts[v] || 0) + ")</option>";
        })
        .join("")
    );
  }
  function fmt(n, digits) {
    return n === null || n === undefined ? "" : Number(n).toFixed(digits);
  }
  function tokensOf(t) {
    var tok = t.tokens || {};
    var total = 0;
    Object.keys(tok).forEach(function (k) {
      if (k !== "cached" && k !== "cached_tokens") total += tok[k];
    });
    return total;
  }

  // -- the page's skeleton ------------------------------------------------------------------------
  var outcomeCounts = count(tasks, function (t) { return t.outcome; });
  outcomeCounts.failed = tasks.filter(function (t) { return FAILED[t.outcome]; }).length;
  var dbs = Object.keys(count(tasks, function (t) { return t.db; })).sort();
  var dbCounts = count(tasks, function (t) { return t.db; });
  var stageCounts = count(tasks, function (t) { return t.stage; });
  var stages = data.stages.filter(function (s) { return stageCounts[s]; });
  Object.keys(stageCounts).forEach(function (s) { if (stages.indexOf(s) < 0) stages.push(s); });

  root.innerHTML =
    '<div class="ex-filters">' +
    '<label>Outcome <select id="f-outcome">' +
    options(["failed", "passed", "wrong", "no_answer", "setup", "not_scored"], outcomeCounts, function (v) {
      return v === "failed" ? "failed (any)" : OUTCOME_TEXT[v];
    }, "all outcomes") +
    "</select></label>" +
    '<label>Database <select id="f-db">' + options(dbs, dbCounts, null, "all databases") + "</select></label>" +
    '<label>Failed at <select id="f-stage">' + options(stages, stageCounts, stageText, "any stage") + "</select></label>" +
    '<label>Search <input id="f-q" type="search" placeholder="id, question or SQL"></label>' +
    '<button type="button" id="f-reset">Reset</button>' +
    '<span id="f-count" class="muted"></span>' +
    "</div>" +
    '<div class="ex-charts">' +
    '<div class="ex-chart"><h3>Accuracy by database</h3><div id="chart-db"></div></div>' +
    '<div class="ex-chart"><h3>Failures by kind</h3><div id="chart-kind"></div></div>' +
    "</div>" +
    '<table class="ex-list"><thead><tr><th>task</th><th>database</th><th>outcome</th><th>failed at</th>' +
    '<th>scorers</th><th class="n">rex</th><th class="n">latency</th><th class="n">model calls</th>' +
    '<th class="n">tokens</th></tr></thead><tbody id="ex-rows"></tbody></table>';

  var body = document.getElementById("ex-rows");
  var PAGE = 200; // rows drawn at a time: the page stays light with thousands of tasks
  var limit = PAGE;
  var open = {}; // task index -> its details are shown

  function rowHtml(t, i) {
    var marks = SCORERS.filter(function (s) { return s in (t.scores || {}); })
      .map(function (s) {
        return '<span class="sc ' + (t.scores[s] ? "ok" : "bad") + '" title="' + esc(s) + '">' + esc(s) + "</span>";
      })
      .join("");
    return (
      '<tr class="ex-row o-' + esc(t.outcome) + (open[i] ? " open" : "") + '" data-i="' + i + '" tabindex="0">' +
      '<td class="ex-id">' + esc(t.id) + "</td><td>" + esc(t.db) + "</td>" +
      '<td><span class="badge o-' + esc(t.outcome) + '">' + esc(OUTCOME_TEXT[t.outcome] || t.outcome) + "</span></td>" +
      "<td>" + esc(t.stage ? stageText(t.stage) : "") + "</td>" +
      "<td>" + marks + "</td>" +
      '<td class="n">' + fmt(t.similarity, 3) + "</td>" +
      '<td class="n">' + (t.latency == null ? "" : fmt(t.latency, 2) + " s") + "</td>" +
      '<td class="n">' + (t.model_calls == null ? "" : t.model_calls) + "</td>" +
      '<td class="n">' + (tokensOf(t) ? tokensOf(t).toLocaleString("en") : "") + "</td></tr>" +
      (open[i] ? '<tr class="ex-detail"><td colspan="9">' + details(t) + "</td></tr>" : "")
    );
  }

  // -- filters ------------------------------------------------------------------------------------
  function matches(t) {
    if (state.outcome === "failed" ? !FAILED[t.outcome] : state.outcome !== "all" && t.outcome !== state.outcome) return false;
    if (state.db !== "all" && t.db !== state.db) return false;
    if (state.stage !== "all" && t.stage !== state.stage) return false;
    if (state.q) {
      var hay = (t.id + " " + (t.question || "") + " " + (t.sql || "") + " " + (t.gold_sql || "")).toLowerCase();
      if (hay.indexOf(state.q.toLowerCase()) < 0) return false;
    }
    return true;
  }
  function draw(indices) {
    var shown = indices.slice(0, limit);
    var more = indices.length - shown.length;
    body.innerHTML =
      shown.map(function (i) { return rowHtml(tasks[i], i); }).join("") +
      (more > 0
        ? '<tr class="ex-more"><td colspan="9">' + shown.length + " of " + indices.length + " listed. " +
          '<button type="button" id="ex-more">List ' + Math.min(PAGE, more) + " more</button> " +
          '<button type="button" id="ex-all">List all ' + indices.length + "</button></td></tr>"
        : "");
  }
  var current = [];
  function apply(keepLimit) {
    if (!keepLimit) limit = PAGE;
    current = [];
    tasks.forEach(function (t, i) { if (matches(t)) current.push(i); });
    draw(current);
    document.getElementById("f-count").textContent = current.length + " of " + tasks.length + " tasks shown";
    charts(current.map(function (i) { return tasks[i]; }));
    var hash = [];
    Object.keys(state).forEach(function (k) {
      if (state[k] && state[k] !== "all") hash.push(k + "=" + encodeURIComponent(state[k]));
    });
    var next = hash.length ? "#" + hash.join("&") : "";
    if (location.hash !== next && history.replaceState) history.replaceState(null, "", next || location.pathname);
  }
  function readHash() {
    state = { outcome: "all", db: "all", stage: "all", q: "" };
    (location.hash || "").replace(/^#/, "").split("&").forEach(function (part) {
      var kv = part.split("=");
      if (kv.length === 2 && kv[0] in state) state[kv[0]] = decodeURIComponent(kv[1]);
    });
    document.getElementById("f-outcome").value = state.outcome;
    document.getElementById("f-db").value = state.db;
    document.getElementById("f-stage").value = state.stage;
    document.getElementById("f-q").value = state.q;
    ["outcome", "db", "stage"].forEach(function (k) {
      if (document.getElementById("f-" + k).value !== state[k]) { state[k] = "all"; document.getElementById("f-" + k).value = "all"; }
    });
  }
  ["outcome", "db", "stage"].forEach(function (k) {
    document.getElementById("f-" + k).addEventListener("change", function (ev) { state[k] = ev.target.value; apply(); });
  });
  document.getElementById("f-q").addEventListener("input", function (ev) { state.q = ev.target.value.trim(); apply(); });
  document.getElementById("f-reset").addEventListener("click", function () {
    state = { outcome: "all", db: "all", stage: "all", q: "" };
    document.getElementById("f-outcome").value = "all";
    document.getElementById("f-db").value = "all";
    document.getElementById("f-stage").value = "all";
    document.getElementById("f-q").value = "";
    apply();
  });

  // -- charts (follow the filters) ----------------------------------------------------------------
  function bars(entries, max, cls) {
    if (!entries.length) return '<p class="muted">nothing here</p>';
    return entries
      .map(function (e) {
        var w = max > 0 ? Math.max(e.value > 0 ? 0.5 : 0, (100 * e.value) / max) : 0;
        return (
          '<div class="bar-row" title="' + esc(e.label + ": " + e.text) + '">' +
          '<span class="bar-label">' + esc(e.label) + "</span>" +
          '<span class="bar-track"><span class="bar ' + (e.cls || cls) + '" style="width:' + w.toFixed(1) + '%"></span></span>' +
          '<span class="bar-text">' + esc(e.text) + "</span></div>"
        );
      })
      .join("");
  }
  function charts(shown) {
    var byDb = {};
    shown.forEach(function (t) {
      if (t.outcome === "not_scored") return;
      var row = byDb[t.db] || (byDb[t.db] = { passed: 0, scored: 0 });
      row.scored += 1;
      if (t.outcome === "passed") row.passed += 1;
    });
    var dbEntries = Object.keys(byDb).sort().map(function (db) {
      var r = byDb[db];
      var pct = r.scored ? (100 * r.passed) / r.scored : 0;
      return { label: db, value: pct, text: pct.toFixed(1) + "% (" + r.passed + "/" + r.scored + ")" };
    });
    document.getElementById("chart-db").innerHTML = bars(dbEntries, 100, "acc");
    var byKind = {};
    shown.forEach(function (t) {
      if (!FAILED[t.outcome]) return;
      var label = (t.category_text || t.category || t.outcome) + (t.outcome === "setup" ? " (setup)" : "");
      var row = byKind[label] || (byKind[label] = { n: 0, setup: t.outcome === "setup" });
      row.n += 1;
    });
    var kindEntries = Object.keys(byKind)
      .map(function (k) { return { label: k, value: byKind[k].n, text: String(byKind[k].n), cls: byKind[k].setup ? "setup" : "fail" }; })
      .sort(function (a, b) { return b.value - a.value || (a.label < b.label ? -1 : 1); });
    var top = kindEntries.length ? kindEntries[0].value : 0;
    document.getElementById("chart-kind").innerHTML = bars(kindEntries, top, "fail");
  }

  // -- one task's details -------------------------------------------------------------------------
  function sqlBlock(title, sql) {
    return '<div><h4>' + esc(title) + "</h4><pre>" + esc(sql || "—") + "</pre></div>";
  }
  function resultsBlock(r) {
    if (!r) return '<p class="muted">No results recorded for this task (it did not reach a comparison, or its record predates them).</p>';
    var cols = r.columns || [];
    var goldCols = [], predCols = [];
    cols.forEach(function (c, d) {
      if (c.gold !== null) goldCols.push(d);
      if (c.pred !== null) predCols.push(d);
    });
    var first = r.first || null;
    function side(which, idxs) {
      var head = idxs.map(function (d) {
        var c = cols[d];
        var note = which === "pv" && c.gold !== null && c.pred !== c.gold ? ' title="paired with gold ' + esc(c.gold) + '"' : "";
        var cls = first && first.column === d && first.line === null ? ' class="first"' : "";
        return "<th" + note + cls + ">" + esc(which === "gv" ? c.gold : c.pred) + "</th>";
      }).join("");
      var bodyRows = (r.lines || []).map(function (ln) {
        var values = ln[which];
        var isFirst = first && first.line === ln.n;
        if (!values) {
          return '<tr class="missing' + (isFirst ? " first-row" : "") + '"><td colspan="' + Math.max(1, idxs.length) + '">' +
            (which === "gv" ? "no gold row" : "no predicted row") + "</td></tr>";
        }
        var cells = idxs.map(function (d) {
          var cls = [];
          if ((ln.diff || []).indexOf(d) >= 0) cls.push("diff");
          if (isFirst && first.column === d) cls.push("first");
          return "<td" + (cls.length ? ' class="' + cls.join(" ") + '"' : "") + ">" + esc(values[d]) + "</td>";
        }).join("");
        return "<tr" + (isFirst ? ' class="first-row"' : "") + ">" + cells + "</tr>";
      }).join("");
      return '<table class="res"><thead><tr>' + head + "</tr></thead><tbody>" + bodyRows + "</tbody></table>";
    }
    var shownFrom = r.lines && r.lines.length ? r.lines[0].n + 1 : 0;
    var shownTo = r.lines && r.lines.length ? r.lines[r.lines.length - 1].n + 1 : 0;
    var text =
      '<p class="firstdiff">' + (first ? "First difference: " + esc(first.text) : "No difference.") + "</p>" +
      '<p class="muted">Rows ' + (r.ordered ? "in order (the gold sorts its result)" : "paired by content (order loose)") +
      "; lines " + shownFrom + "–" + shownTo + " of " + (r.lines_total || 0) + ".</p>";
    var predSide = r.pred_rows == null
      ? '<p class="muted">' + esc(r.error || "no predicted result") + "</p>"
      : side("pv", predCols);
    return text + '<div class="two"><div><h4>gold result (' + r.gold_rows + " rows)</h4>" + side("gv", goldCols) +
      "</div><div><h4>predicted result" + (r.pred_rows == null ? "" : " (" + r.pred_rows + " rows)") + "</h4>" + predSide + "</div></div>";
  }
  function verdictsBlock(t) {
    var names = SCORERS.filter(function (s) { return s in (t.scores || {}); });
    if (!names.length) return '<p class="reason">' + esc(t.reason || "") + "</p>";
    return '<table class="verdicts"><tr><th>scorer</th><th>verdict</th><th>why</th></tr>' + names.map(function (s) {
      var v = t.scores[s] ? "pass" : "fail";
      if (s === "rex" && t.similarity != null) v += " · " + fmt(t.similarity, 3);
      var why = t.scores[s] ? "" : (t.reasons || {})[s] || "";
      return "<tr><td><code>" + esc(s) + '</code></td><td class="' + (t.scores[s] ? "ok" : "bad") + '">' + esc(v) +
        '</td><td class="reason">' + esc(why) + "</td></tr>";
    }).join("") + "</table>";
  }
  var KIND_ICON = { stage: "▸", model: "◆", tool: "⚙", candidate: "◇", verdict: "✓", selection: "★", answer: "■", problem: "!", note: "·", other: "?" };
  function timelineBlock(t) {
    var tr = t.trace;
    if (!tr) return '<p class="muted">No trace: this runner does not record one.</p>';
    if (tr.error) return '<p class="warn">' + esc(tr.error) + "</p>";
    var items = tr.items || [];
    if (!items.length) return '<p class="muted">The trace is empty.</p>';
    var end = 0;
    items.forEach(function (it) {
      if (it.t != null) end = Math.max(end, it.t + (it.d || 0));
    });
    end = end || 1;
    var sum = (tr.summary && tr.summary.tokens) || {};
    var models = items.filter(function (it) { return it.k === "model"; }).length;
    var toolsN = items.filter(function (it) { return it.k === "tool"; }).length;
    var repairs = items.filter(function (it) { return it.repair || (it.k === "stage" && it.s === "repair"); }).length;
    var names = (tr.summary && tr.summary.models) || [];
    var head =
      '<p class="muted">' + (names.length ? "Model " + esc(names.join(", ")) + ": " : "") + models + " model calls (" + (sum.prompt || 0).toLocaleString("en") + " prompt" +
      (sum.cached != null ? ", " + sum.cached.toLocaleString("en") + " cached" : "") + ", " +
      (sum.completion || 0).toLocaleString("en") + " completion tokens), " + toolsN + " tool calls, " +
      repairs + " repair steps, " + end.toFixed(2) + " s.</p>";
    var list = items.map(function (it) {
      var left = it.t == null ? 0 : (100 * it.t) / end;
      var width = it.d ? Math.max(0.4, (100 * it.d) / end) : 0.4;
      var cls = ["tl", "k-" + it.k];
      if (it.ok === false) cls.push("bad");
      if (it.repair || (it.k === "stage" && it.s === "repair")) cls.push("repair");
      var tok = "";
      if (it.tok) {
        tok = (it.tok.prompt || 0) + "+" + (it.tok.completion || 0) + " tok" + (it.tok.cached ? " (" + it.tok.cached + " cached)" : "");
      }
      var out = it.outcome ? it.outcome : it.ok === false ? "failed" : "";
      var detail = it.detail || "";
      if (it.result) detail += (detail ? " → " : "") + it.result;
      return (
        '<li class="' + cls.join(" ") + '">' +
        '<span class="tl-t">' + (it.t == null ? "" : it.t.toFixed(2) + " s") + "</span>" +
        '<span class="tl-s">' + esc(it.s || "") + "</span>" +
        '<span class="tl-i">' + (KIND_ICON[it.k] || "?") + "</span>" +
        '<span class="tl-l">' + esc(it.label || it.k) +
        (it.d ? ' <span class="muted">' + fmt(it.d, 3) + " s</span>" : "") +
        (tok ? ' <span class="tok">' + esc(tok) + "</span>" : "") +
        (out ? ' <span class="oc oc-' + esc(out) + '">' + esc(out) + "</span>" : "") +
        (it.req ? '<span class="tl-d tl-req">' + esc(it.req) + "</span>" : "") +
        (detail ? '<span class="tl-d">' + esc(detail) + "</span>" : "") + "</span>" +
        '<span class="tl-bar"><span style="left:' + left.toFixed(2) + "%;width:" + Math.min(width, 100 - left).toFixed(2) + '%"></span></span>' +
        "</li>"
      );
    }).join("");
    return head + '<ol class="timeline">' + list + "</ol>";
  }
  function details(t) {
    return (
      '<div class="ex-q"><b>Question.</b> ' + esc(t.question || "—") + "</div>" +
      '<p><span class="badge o-' + esc(t.outcome) + '">' + esc(OUTCOME_TEXT[t.outcome] || t.outcome) + "</span> " +
      (t.stage ? "failed at <b>" + esc(stageText(t.stage)) + "</b>; " : "") +
      '<span class="reason">' + esc(t.reason || "") + "</span></p>" +
      "<h4>SQL</h4>" + '<div class="two">' + sqlBlock("gold SQL", t.gold_sql) + sqlBlock("predicted SQL", t.sql) + "</div>" +
      "<h4>Results</h4>" + resultsBlock(t.results) +
      "<h4>Verdicts</h4>" + verdictsBlock(t) +
      "<h4>Trace</h4>" + timelineBlock(t)
    );
  }
  function toggle(row) {
    var i = Number(row.getAttribute("data-i"));
    var next = row.nextElementSibling;
    if (next && next.classList.contains("ex-detail")) {
      next.parentNode.removeChild(next);
      row.classList.remove("open");
      delete open[i];
      return;
    }
    var tr = document.createElement("tr");
    tr.className = "ex-detail";
    tr.innerHTML = '<td colspan="9">' + details(tasks[i]) + "</td>";
    row.parentNode.insertBefore(tr, row.nextSibling);
    row.classList.add("open");
    open[i] = true;
  }
  body.addEventListener("click", function (ev) {
    if (ev.target.id === "ex-more" || ev.target.id === "ex-all") {
      limit = ev.target.id === "ex-all" ? current.length : limit + PAGE;
      draw(current);
      return;
    }
    var row = ev.target.closest ? ev.target.closest("tr.ex-row") : null;
    if (row) toggle(row);
  });
  body.addEventListener("keydown", function (ev) {
    if ((ev.key === "Enter" || ev.key === " ") && ev.target.classList && ev.target.classList.contains("ex-row")) {
      ev.preventDefault();
      toggle(ev.target);
    }
  });

  window.addEventListener("hashchange", function () {
    readHash();
    apply();
  });
  readHash();
  apply();
  root.setAttribute("data-ready", "1");
  window.reportReadyMs = performance.now();
})();
