package main

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestREADME checks that the README's library example is this program, from
// "package main" to the end, so that go build and go vet compile the
// README's copy, and that it imports one goroce package (issue 28).
func TestREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(readme), "\n```go\n")
	require.True(t, ok, "README.md has no ```go block")
	block, _, ok = strings.Cut(block, "\n```\n")
	require.True(t, ok, "README.md's ```go block does not end")
	block += "\n"

	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	i := strings.Index(string(src), "package main\n")
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, string(src[i:]), block, "README.md's example and examples/write/main.go differ")

	f, err := parser.ParseFile(token.NewFileSet(), "README.md", block, parser.ImportsOnly)
	require.NoError(t, err)
	var goroce []string
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		require.NoError(t, err)
		if strings.HasPrefix(p, "github.com/goroce/goroce") {
			goroce = append(goroce, p)
		}
	}
	assert.Equal(t, []string{"github.com/goroce/goroce/roce"}, goroce)
}
