package testutil

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"testing"
)

// ParseXML parses doc as strict XML (the HTML reports and pages goroce
// writes are XHTML with inline SVG) and returns its start elements in
// document order; the error is the first that makes doc not well-formed.
func ParseXML(doc []byte) ([]xml.StartElement, error) {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	dec.Strict = true
	var els []xml.StartElement
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return els, nil
		}
		if err != nil {
			return els, err
		}
		if el, ok := tok.(xml.StartElement); ok {
			els = append(els, el.Copy())
		}
	}
}

// RequireXML is ParseXML that fails t immediately unless doc is
// well-formed.
func RequireXML(t testing.TB, doc []byte) []xml.StartElement {
	t.Helper()
	els, err := ParseXML(doc)
	if err != nil {
		t.Fatalf("not well-formed XML: %v", err)
	}
	return els
}
