(function(){
  var data = JSON.parse(document.getElementById('prove-data').textContent);
  var fields = data.fields;
  function show(panel, row){
    var dl = document.createElement('dl');
    fields.forEach(function(f){
      var v = row[f[0]]; if (v === null || v === undefined) { return; }
      var dt = document.createElement('dt'); dt.textContent = f[1];
      var dd = document.createElement('dd'); dd.textContent = String(v);
      dd.setAttribute('data-field', f[0]);
      dl.appendChild(dt); dl.appendChild(dd);
    });
    panel.replaceChildren(dl);
  }
  // Enter on a cell: to the first twin of its condition that ended differently, where the
  // page lists them by condition (rows marked data-twins-of; pytest-prove serve's list).
  function openTwins(cell){
    var row = data.rows[Number(cell.getAttribute('data-i'))]; if (!row) { return; }
    var to = Array.prototype.find.call(document.querySelectorAll('[data-twins-of]'),
      function(e){ return e.getAttribute('data-twins-of') === row.condition; });
    if (!to) { return; }
    var shut = to.closest('details'); if (shut) { shut.open = true; }
    var link = to.querySelector('a'); if (link) { link.focus(); }
  }
  document.querySelectorAll('section.event').forEach(function(section){
    var panel = section.querySelector('.details');
    var cells = Array.prototype.slice.call(section.querySelectorAll('td.cell[data-i]'));
    var box = section.querySelector('.forest-box');
    var marks = box ? Array.prototype.slice.call(box.querySelectorAll('g.fr[data-i]')) : [];
    var cellOf = {}, markOf = {}, current = null;
    cells.forEach(function(c){ cellOf[c.getAttribute('data-i')] = c; });
    marks.forEach(function(g){ markOf[g.getAttribute('data-i')] = g; });
    // One selection per event, shown in the grid (a ring, and the cell Tab reaches) and in
    // the forest plot (a band), and read out in the details panel.
    function select(i, from){
      i = String(i);
      if (current !== null && current !== i) {
        if (cellOf[current]) { cellOf[current].classList.remove('sel');
          cellOf[current].setAttribute('aria-selected', 'false'); }
        if (markOf[current]) { markOf[current].classList.remove('sel'); }
      }
      current = i;
      var cell = cellOf[i], mark = markOf[i];
      if (cell) {
        cell.classList.add('sel'); cell.setAttribute('aria-selected', 'true');
        // The chosen cell is the one Tab reaches in its grid.
        cell.closest('table.grid').querySelectorAll('td.cell[tabindex="0"]').forEach(
          function(c){ if (c !== cell) { c.setAttribute('tabindex', '-1'); } });
        cell.setAttribute('tabindex', '0');
      }
      if (mark) {
        mark.classList.add('sel');
        var band = box.querySelector('rect.hl'), dot = mark.querySelector('circle.pt');
        band.setAttribute('y', String(Number(dot.getAttribute('cy')) - 9));
        if (from !== 'init') {
          var r = mark.getBoundingClientRect(), b = box.getBoundingClientRect();
          if (r.top < b.top) { box.scrollTop -= b.top - r.top + 6; }
          else if (r.bottom > b.bottom) { box.scrollTop += r.bottom - b.bottom + 6; }
        }
      }
      if (box) { box.setAttribute('data-selected', i); }
      show(panel, data.rows[Number(i)]);
    }
    cells.forEach(function(cell){
      cell.addEventListener('focus', function(){ select(cell.getAttribute('data-i'), 'grid'); });
      cell.addEventListener('mouseenter', function(){
        show(panel, data.rows[Number(cell.getAttribute('data-i'))]); });
    });
    marks.forEach(function(g){
      g.addEventListener('click', function(){ select(g.getAttribute('data-i'), 'forest');
        box.focus({preventScroll: true}); });
      g.addEventListener('mouseenter', function(){
        show(panel, data.rows[Number(g.getAttribute('data-i'))]); });
    });
    if (box) {
      box.addEventListener('keydown', function(ev){
        var at = current !== null && markOf[current] ? marks.indexOf(markOf[current]) : -1;
        var page = Math.max(1, Math.floor(box.clientHeight / 20));
        var moves = {ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page};
        var next;
        if (ev.key in moves) { next = at < 0 ? 0 : at + moves[ev.key]; }
        else if (ev.key === 'Home') { next = 0; }
        else if (ev.key === 'End') { next = marks.length - 1; }
        else { return; }
        ev.preventDefault();
        next = Math.min(Math.max(next, 0), marks.length - 1);
        if (marks[next]) { select(marks[next].getAttribute('data-i'), 'forest'); }
      });
    }
    var start = section.querySelector('td.cell[data-start]') || cells[0];
    if (start) { select(start.getAttribute('data-i'), 'init'); }
    section.querySelectorAll('table.grid').forEach(function(grid){
      grid.addEventListener('keydown', function(ev){
        var cell = ev.target.closest('td'); if (!cell) { return; }
        if (ev.key === 'Enter') { openTwins(cell); return; }
        var tr = cell.parentElement, rows = Array.prototype.slice.call(grid.tBodies[0].rows);
        var r = rows.indexOf(tr), c = Array.prototype.indexOf.call(tr.cells, cell);
        var moves = {ArrowRight:[0,1],ArrowLeft:[0,-1],ArrowDown:[1,0],ArrowUp:[-1,0]};
        var m = moves[ev.key];
        if (ev.key === 'Home') { m = [0, 1 - c]; } else if (ev.key === 'End') {
          m = [0, tr.cells.length - 1 - c]; }
        if (!m) { return; }
        ev.preventDefault();
        var nr = Math.min(Math.max(r + m[0], 0), rows.length - 1);
        var nc = Math.min(Math.max(c + m[1], 1), rows[nr].cells.length - 1);
        var next = rows[nr].cells[nc];
        if (next && next !== cell) {
          cell.setAttribute('tabindex', '-1'); next.setAttribute('tabindex', '0'); next.focus();
        }
      });
    });
  });
  // The page opens on its worst cell (see worst_first): focused, so the arrows start there.
  if (data.worst !== null) {
    var worst = document.querySelector('td.cell[data-i="' + data.worst + '"]');
    if (worst) { worst.focus(); }
  }
})();
