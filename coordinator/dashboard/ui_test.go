package dashboard

import (
	"bytes"
	"testing"
)

// The page is served with its includes expanded: the control panel is in
// it, no include line is left.
func TestUIPageIncludes(t *testing.T) {
	page, err := uiPage()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(page, []byte("<!--#include")) || !bytes.Contains(page, []byte(`<section id="control">`)) {
		t.Fatalf("includes not expanded:\n%s", page)
	}
	if n := bytes.Count(page, []byte("</html>")); n != 1 {
		t.Fatalf("%d </html> in the page", n)
	}
}
