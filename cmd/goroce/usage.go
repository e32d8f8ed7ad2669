package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

// flagGroup is one heading of a command's help and the flags listed under
// it, in the order given.
type flagGroup struct {
	title string
	flags []string
}

// printFlags writes the flags of fs as flag.PrintDefaults does, but under
// the headings of groups, in their order (a group none of whose flags fs
// has is left out). A flag whose usage is "same as
// -X" is printed on X's line ("-s, --size int"); flags that no group names
// follow under "other flags" (under "flags" when there are no groups).
// Usage texts are wrapped at usageWidth.
// Names of more than one letter get two dashes, as perftest and tshark
// spell them (the flag package accepts one or two). doc/cli.md lists the
// same groups; TestCLIDoc keeps the two in step.
func printFlags(w io.Writer, fs *flag.FlagSet, groups []flagGroup) {
	all := map[string]*flag.Flag{}
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		all[f.Name] = f
		names = append(names, f.Name)
	})
	aliases := map[string][]string{}
	isAlias := map[string]bool{}
	for _, n := range names {
		target, ok := aliasOf(all[n])
		if ok && all[target] != nil && target != n {
			aliases[target] = append(aliases[target], n)
			isAlias[n] = true
		}
	}
	for _, a := range aliases { // perftest's spelling (--use_event) first
		sort.SliceStable(a, func(i, j int) bool {
			return strings.Contains(a[i], "_") && !strings.Contains(a[j], "_")
		})
	}
	done := map[string]bool{}
	for _, g := range groups {
		title := "\n" + g.title + ":\n" // printed before the group's first flag of fs
		for _, n := range g.flags {
			if f := all[n]; f != nil && !done[n] {
				fmt.Fprint(w, title)
				title = ""
				printFlag(w, f, aliases[n])
				done[n] = true
			}
		}
	}
	var rest []string
	for _, n := range names {
		if !done[n] && !isAlias[n] {
			rest = append(rest, n)
		}
	}
	if len(rest) == 0 {
		return
	}
	sort.Strings(rest)
	if len(groups) == 0 {
		fmt.Fprintln(w, "\nflags:")
	} else {
		fmt.Fprintln(w, "\nother flags:")
	}
	for _, n := range rest {
		printFlag(w, all[n], aliases[n])
	}
}

// aliasOf returns the flag that f repeats under another name, when f's
// usage is exactly "same as -X" or "same as --X".
func aliasOf(f *flag.Flag) (string, bool) {
	rest, ok := strings.CutPrefix(f.Usage, "same as -")
	if !ok {
		return "", false
	}
	rest = strings.TrimPrefix(rest, "-")
	if rest == "" || strings.ContainsAny(rest, " \t") {
		return "", false
	}
	return rest, true
}

// dashed spells a flag name as it is written in doc/cli.md and in help:
// -x for one letter, --name for more.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// printFlag writes one flag in flag.PrintDefaults' layout.
func printFlag(w io.Writer, f *flag.Flag, aliases []string) {
	var b strings.Builder
	b.WriteString("  ")
	b.WriteString(dashed(f.Name))
	for _, a := range aliases {
		b.WriteString(", ")
		b.WriteString(dashed(a))
	}
	typ, usage := flag.UnquoteUsage(f)
	if isBool(f) {
		// A bool flag takes no argument: a back-quoted word in its usage
		// is prose, not an argument name.
		typ, usage = "", strings.ReplaceAll(f.Usage, "`", "")
	}
	if typ != "" {
		b.WriteString(" ")
		b.WriteString(typ)
	}
	if b.Len() <= 4 && len(aliases) == 0 { // "  -x": the usage on the same line
		b.WriteString("\t")
	} else {
		b.WriteString("\n    \t")
	}
	if !isZeroValue(f) {
		if isString(f) {
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		} else {
			usage += fmt.Sprintf(" (default %v)", f.DefValue)
		}
	}
	b.WriteString(strings.Join(wrap(usage, usageWidth), "\n    \t"))
	fmt.Fprintln(w, b.String())
}

// usageWidth is where printFlag wraps a usage text: 80 columns with the
// tab that indents it.
const usageWidth = 72

// wrap breaks s into lines of at most width bytes at spaces (a longer
// word keeps a line of its own); it keeps s's own line breaks.
func wrap(s string, width int) []string {
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			switch {
			case line == "":
				line = word
			case len(line)+1+len(word) <= width:
				line += " " + word
			default:
				lines = append(lines, line)
				line = word
			}
		}
		lines = append(lines, line)
	}
	return lines
}

// isBool reports whether f needs no argument (flag's boolFlag interface).
func isBool(f *flag.Flag) bool {
	bf, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && bf.IsBoolFlag()
}

// isString reports whether f was made by FlagSet.String or StringVar,
// whose default flag.PrintDefaults quotes.
func isString(f *flag.Flag) bool {
	t := reflect.TypeOf(f.Value)
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.String && t.Elem().PkgPath() == "flag"
}

// isZeroValue reports whether f's default is its type's zero value, which
// flag.PrintDefaults does not print; it decides the same way.
func isZeroValue(f *flag.Flag) (zero bool) {
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	defer func() {
		if recover() != nil { // a String method that needs a non-zero receiver
			zero = false
		}
	}()
	v, ok := z.Interface().(flag.Value)
	return ok && f.DefValue == v.String()
}
