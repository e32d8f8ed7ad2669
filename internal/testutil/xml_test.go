package testutil

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseXML(t *testing.T) {
	els, err := ParseXML([]byte(`<html><body><svg width="10" height="5"><path d="M0 0"/></svg><p>a &amp; b</p></body></html>`))
	require.NoError(t, err)
	var names []string
	for _, e := range els {
		names = append(names, e.Name.Local)
	}
	assert.Equal(t, []string{"html", "body", "svg", "path", "p"}, names)
	assert.Equal(t, "width", els[2].Attr[0].Name.Local)
	assert.Equal(t, "10", els[2].Attr[0].Value)

	for _, bad := range []string{
		`<p>unclosed`,
		`<p><b></p></b>`,
		`<p>a & b</p>`, // strict: a bare ampersand
		`<p a=1></p>`,  // strict: an unquoted attribute
	} {
		_, err := ParseXML([]byte(bad))
		assert.Error(t, err, "%s", bad)
	}
}
