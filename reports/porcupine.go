package reports

import "bytes"

// openAtFirstError is added to porcupine's page: once porcupine has drawn
// the history it follows porcupine's own "jump to first error" link, so
// the page opens at the op where the order breaks instead of at time 0.
// Embedded in the report (an iframe) it scrolls only its own document, so
// the report does not jump to the iframe.
const openAtFirstError = `<script>
addEventListener('load', function () {
  var jump = document.querySelector('#jump-link');
  if (!jump) { return; }
  var scroll = Element.prototype.scrollIntoView;
  if (window.parent !== window) {
    Element.prototype.scrollIntoView = function () {
      var r = this.getBoundingClientRect();
      window.scrollTo(window.scrollX + r.left - innerWidth / 2, window.scrollY + r.top - innerHeight / 2);
    };
  }
  jump.dispatchEvent(new MouseEvent('click'));
  Element.prototype.scrollIntoView = scroll;
});
</script>
`

// PorcupinePage is porcupine's visualization of one partition
// (checker.Result.Visualizations) as the harness stores it
// (LinearVisualizationFile): opened at the first error.
func PorcupinePage(visualization []byte) []byte {
	i := bytes.LastIndex(visualization, []byte("</body>"))
	if i < 0 {
		return append(append([]byte(nil), visualization...), openAtFirstError...)
	}
	out := make([]byte, 0, len(visualization)+len(openAtFirstError))
	out = append(out, visualization[:i]...)
	out = append(out, openAtFirstError...)
	return append(out, visualization[i:]...)
}
