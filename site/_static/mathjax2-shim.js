// The ipywidgets HTML manager typesets widget labels with MathJax 2's MathJax.Hub.Queue; this
// site serves MathJax 3, whose equivalent is MathJax.typesetPromise. Installed once MathJax 3
// has defined its global (deferred scripts run before DOMContentLoaded; widgets are drawn on load).
(function () {
  "use strict";
  function install() {
    var mathjax = window.MathJax;
    if (!mathjax || mathjax.Hub) return;
    mathjax.Hub = {
      Queue: function (job) {
        var element = Array.isArray(job) ? job[2] : undefined;
        if (!mathjax.startup || !mathjax.typesetPromise) return;
        mathjax.startup.promise.then(function () {
          return mathjax.typesetPromise(element ? [element] : undefined);
        });
      },
    };
  }
  install();
  document.addEventListener("DOMContentLoaded", install);
})();
