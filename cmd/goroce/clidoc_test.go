package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cliSection is the text under one "goroce …" heading of doc/cli.md, up to
// the next such heading.
type cliSection struct {
	args []string // "cap", "flows"
	text string
}

var (
	cliHeading = regexp.MustCompile(`^#{2,3} goroce ([a-z][a-z ]*)$`)
	// helpFlagLine matches a flag line of printFlags and flag.PrintDefaults:
	// "  -s, --size int", "  -a\trun all sizes".
	helpFlagLine = regexp.MustCompile(`^  (-{1,2}[^\s,]+(?:, -{1,2}[^\s,]+)*)`)
	cellFlag     = regexp.MustCompile("`(--?[A-Za-z0-9][A-Za-z0-9_-]*)")
	flagsRef     = regexp.MustCompile(`Flags: (doc/[a-z0-9_-]+\.md)`)
)

// cliSections splits doc/cli.md at its "## goroce X" and "### goroce X Y"
// headings.
func cliSections(doc string) []cliSection {
	var out []cliSection
	for _, line := range strings.Split(doc, "\n") {
		if m := cliHeading.FindStringSubmatch(line); m != nil {
			out = append(out, cliSection{args: strings.Fields(m[1])})
			continue
		}
		if strings.HasPrefix(line, "## ") && len(out) > 0 && out[len(out)-1].text != "" {
			// A level-2 heading that is not a command's ends the section.
			out = append(out, cliSection{})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].text += line + "\n"
		}
	}
	var secs []cliSection
	for _, s := range out {
		if s.args != nil {
			secs = append(secs, s)
		}
	}
	return secs
}

// helpFlags returns the flag names (without dashes) that a -h output lists.
func helpFlags(help string) []string {
	var names []string
	for _, line := range strings.Split(help, "\n") {
		m := helpFlagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, n := range strings.Split(m[1], ", ") {
			names = append(names, strings.TrimLeft(n, "-"))
		}
	}
	return names
}

// tableFlags returns the flag names in the first column of text's
// Markdown tables.
func tableFlags(text string) []string {
	var names []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| `-") {
			continue
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "/"), "|")
		for _, m := range cellFlag.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, strings.TrimLeft(m[1], "-"))
		}
	}
	return names
}

// mentions reports whether text names flag as `-name…` or `--name…`.
func mentions(text, name string) bool {
	return regexp.MustCompile("`--?" + regexp.QuoteMeta(name) + "(?:[ `=,]|$)").MatchString(text)
}

// TestCLIDoc keeps doc/cli.md and the commands' help in step (issue 28):
// every command has a "## goroce NAME" section; every flag that an
// invocation's -h prints is named in that invocation's section (or in the
// doc/ file the section names in a "Flags: doc/…" line); every flag in the
// first column of a section's tables is one the invocation has.
func TestCLIDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, "doc/cli.md"))
	require.NoError(t, err)
	secs := cliSections(string(b))
	require.NotEmpty(t, secs)
	known := map[string]bool{}
	for _, c := range commands() {
		known[c.name] = true
	}
	documented := map[string]bool{}
	for _, s := range secs {
		documented[s.args[0]] = true
	}
	for _, c := range commands() {
		assert.True(t, documented[c.name], "doc/cli.md has no section \"## goroce %s\"", c.name)
	}
	total := 0
	for _, s := range secs {
		name := strings.Join(s.args, " ")
		t.Run(name, func(t *testing.T) {
			if !known[s.args[0]] {
				t.Skipf("doc/cli.md documents goroce %s, which this build does not have yet", s.args[0])
			}
			if name == "fabric incast" && runtime.GOOS != "linux" {
				t.Skip("goroce fabric incast is Linux only")
			}
			code, stdout, stderr := runCmd(append(append([]string(nil), s.args...), "-h")...)
			require.Equal(t, 0, code, stderr)
			help := helpFlags(stdout + stderr)
			total += len(help)
			text := s.text
			if m := flagsRef.FindStringSubmatch(text); m != nil {
				ref, err := os.ReadFile(filepath.Join(repo, m[1]))
				require.NoError(t, err, "the section names %s for its flags", m[1])
				text += string(ref)
			}
			for _, f := range help {
				assert.True(t, mentions(text, f), "goroce %s -h lists %s, which doc/cli.md does not", name, dashed(f))
			}
			has := map[string]bool{}
			for _, f := range help {
				has[f] = true
			}
			for _, f := range tableFlags(s.text) {
				assert.True(t, has[f], "doc/cli.md lists %s under goroce %s, which has no such flag", dashed(f), name)
			}
		})
	}
	assert.Greater(t, total, 100, "the help of all commands lists more flags than that: is helpFlagLine out of date?")
}

// TestPrintFlags checks the grouped help: headings in order, a group
// without flags left out, aliases on their flag's line, the rest under
// "other flags", PrintDefaults' layout and defaults.
func TestPrintFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("s", 0, "message size")
	fs.Int("size", 0, "same as -s")
	fs.Bool("a", false, "all sizes")
	fs.String("link", "udp", "the binding")
	fs.Duration("timeout", 30*time.Second, "limit for each `STEP`")
	fs.Bool("stats", false, "print `rdma statistic show` lines")
	fs.Int("zz", 7, "not in a group")
	var b bytes.Buffer
	printFlags(&b, fs, []flagGroup{
		{"the test", []string{"a", "s", "timeout"}},
		{"absent", []string{"nothere"}},
		{"output", []string{"stats", "link"}},
	})
	want := `
the test:
  -a	all sizes
  -s, --size int
    	message size
  --timeout STEP
    	limit for each STEP (default 30s)

output:
  --stats
    	print rdma statistic show lines
  --link string
    	the binding (default "udp")

other flags:
  --zz int
    	not in a group (default 7)
`
	assert.Equal(t, want, b.String())

	b.Reset()
	printFlags(&b, flag.NewFlagSet("none", flag.ContinueOnError), nil)
	assert.Empty(t, b.String(), "a command without flags prints no heading")
}

// TestWrap checks the usage text's line breaks.
func TestWrap(t *testing.T) {
	assert.Equal(t, []string{"aa bb", "cc"}, wrap("aa bb cc", 5))
	assert.Equal(t, []string{"aaaaaaa", "b"}, wrap("aaaaaaa b", 5))
	assert.Equal(t, []string{"a", "b c"}, wrap("a\nb c", 10))
}
