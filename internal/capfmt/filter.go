package capfmt

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
)

// ErrFilter is wrapped by every error of CompileFilter.
var ErrFilter = errors.New("invalid display filter")

// Filter is a compiled display filter (tshark -Y). The zero Filter (and a
// nil *Filter) matches every packet. A Filter is immutable and may be
// shared between goroutines.
type Filter struct {
	root *node
	src  string
}

// String returns the filter's source text.
func (f *Filter) String() string {
	if f == nil {
		return ""
	}
	return f.src
}

// Match reports whether p passes the filter. It does not allocate.
func (f *Filter) Match(p *Packet) bool {
	if f == nil || f.root == nil {
		return true
	}
	return f.root.eval(p)
}

// Uses reports whether the filter refers to field f.
func (f *Filter) Uses(field Field) bool {
	if f == nil {
		return false
	}
	var walk func(n *node) bool
	walk = func(n *node) bool {
		return n != nil && (n.field == field && (n.op == opExists || n.op == opCmp || n.op == opIn) || walk(n.left) || walk(n.right))
	}
	return walk(f.root)
}

// RoCEOnly reports whether the filter is exactly "infiniband" (or the
// alias "roce"), which callers can test with Packet.RoCE alone.
func (f *Filter) RoCEOnly() bool {
	return f != nil && f.root != nil && f.root.op == opExists && f.root.field == ProtoInfiniband
}

type nodeOp uint8

const (
	opAnd nodeOp = iota
	opOr
	opNot
	opExists // the field or protocol occurs
	opCmp    // field relop value
	opIn     // field in {values}
)

type relOp uint8

const (
	relEq    relOp = iota
	relNe          // tshark 4.0 "!=": every occurrence differs
	relAnyNe       // "~=", "!==": some occurrence differs
	relLt
	relLe
	relGt
	relGe
)

type quant uint8

const (
	quantDefault quant = iota
	quantAny
	quantAll
)

// node is one operator of the filter tree.
type node struct {
	op          nodeOp
	left, right *node
	field       Field
	rel         relOp
	quant       quant
	vals        []value
	// slice of a byte field: [lo:hi), hi < 0 meaning to the end.
	sliced bool
	lo, hi int
}

// value is a typed literal.
type value struct {
	u  uint64 // integers, booleans, times (int64 ns), IPv4 as uint32, status
	b  []byte // bytes; IPv6 address (16)
	pf int    // address prefix length for CIDR literals; -1 for a plain address
}

func (n *node) eval(p *Packet) bool {
	switch n.op {
	case opAnd:
		return n.left.eval(p) && n.right.eval(p)
	case opOr:
		return n.left.eval(p) || n.right.eval(p)
	case opNot:
		return !n.left.eval(p)
	case opExists:
		if n.field == ProtoInfiniband {
			return p.RoCE
		}
		return p.Has(n.field)
	}
	// opCmp, opIn: quantified over the occurrences.
	all := n.quant == quantAll || (n.quant == quantDefault && n.op == opCmp && n.rel == relNe)
	seen := false
	for i := range p.Items {
		it := &p.Items[i]
		if it.Field != n.field {
			continue
		}
		seen = true
		ok := n.test(it)
		if all && !ok {
			return false
		}
		if !all && ok {
			return true
		}
	}
	return all && seen
}

// test evaluates the comparison on one occurrence.
func (n *node) test(it *Item) bool {
	if n.op == opIn {
		for i := range n.vals {
			if compare(n, it, &n.vals[i]) == 0 {
				return true
			}
		}
		return false
	}
	c := compare(n, it, &n.vals[0])
	switch n.rel {
	case relEq:
		return c == 0
	case relNe, relAnyNe:
		return c != 0
	case relLt:
		return c == -1
	case relLe:
		return c == -1 || c == 0
	case relGt:
		return c == 1
	case relGe:
		return c == 1 || c == 0
	}
	return false
}

// compare orders an occurrence against a literal: -1, 0, 1, or 2 when they
// are not comparable (a slice out of range).
func compare(n *node, it *Item, v *value) int {
	switch fieldInfos[n.field].kind {
	case kindUint, kindHex, kindBool, kindStatus:
		return cmpU64(it.Value, v.u)
	case kindRelTime:
		a, b := int64(it.Value), int64(v.u)
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	case kindIPv4:
		if len(it.Bytes) != 4 {
			return 2
		}
		a := uint64(it.Bytes[0])<<24 | uint64(it.Bytes[1])<<16 | uint64(it.Bytes[2])<<8 | uint64(it.Bytes[3])
		if v.pf >= 0 {
			mask := uint64(0xffffffff) << (32 - uint(v.pf)) & 0xffffffff
			if a&mask == v.u&mask {
				return 0
			}
			return cmpU64(a&mask, v.u&mask)
		}
		return cmpU64(a, v.u)
	case kindIPv6:
		if len(it.Bytes) != 16 {
			return 2
		}
		if v.pf >= 0 {
			a, _ := netip.AddrFromSlice(it.Bytes)
			pfx, err := a.Prefix(v.pf)
			if err == nil {
				b, _ := netip.AddrFromSlice(v.b)
				if pfx.Contains(b) {
					return 0
				}
			}
			return bytes.Compare(it.Bytes, v.b)
		}
		return bytes.Compare(it.Bytes, v.b)
	case kindBytes:
		b := it.Bytes
		if n.sliced {
			lo, hi := n.lo, n.hi
			if hi < 0 {
				hi = len(b)
			}
			if lo > len(b) || hi > len(b) || lo > hi {
				return 2
			}
			b = b[lo:hi]
		}
		return bytes.Compare(b, v.b)
	}
	return 2
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CompileFilter parses a display filter in tshark's syntax: protocol and
// field names (presence), comparisons with == != < > <= >= (or eq ne lt gt
// le ge, ~= / !== for "any not equal"), "in {a, b}", the any/all
// quantifiers, byte-field slices ([i], [i:n], [i-j]), &&, ||, ! (and, or,
// not) and parentheses. Literals are decimal, 0x hex or 0-prefixed octal
// integers, true/false, IPv4/IPv6 addresses (with /prefix), bytes as
// aa:bb:cc or plain hex, quoted strings, seconds for frame.time_relative,
// and good/bad for roce.icrc.status. "roce" is goroce's alias for the
// "infiniband" protocol (tshark rejects it). Semantics follow tshark 4.0: a
// comparison holds when any occurrence satisfies it, except "!=", which
// needs every occurrence to differ. An empty filter matches everything.
func CompileFilter(src string) (*Filter, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return &Filter{src: src}, nil
	}
	ps := &parser{toks: toks}
	root, err := ps.parseOr()
	if err != nil {
		return nil, err
	}
	if ps.pos < len(ps.toks) {
		return nil, fmt.Errorf("%w: unexpected %q", ErrFilter, ps.toks[ps.pos].text)
	}
	return &Filter{root: root, src: src}, nil
}

type tokKind uint8

const (
	tokWord tokKind = iota
	tokString
	tokOp // operators and punctuation
)

type token struct {
	kind tokKind
	text string
}

// lex splits a filter into tokens.
func lex(s string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"':
			str, n, err := lexString(s[i:])
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokString, text: str})
			i += n
		case strings.HasPrefix(s[i:], "!=="), strings.HasPrefix(s[i:], "==="):
			toks = append(toks, token{kind: tokOp, text: s[i : i+3]})
			i += 3
		case strings.HasPrefix(s[i:], "=="), strings.HasPrefix(s[i:], "!="), strings.HasPrefix(s[i:], "<="),
			strings.HasPrefix(s[i:], ">="), strings.HasPrefix(s[i:], "~="), strings.HasPrefix(s[i:], "&&"),
			strings.HasPrefix(s[i:], "||"):
			toks = append(toks, token{kind: tokOp, text: s[i : i+2]})
			i += 2
		case strings.IndexByte("()!<>{},[]=", c) >= 0:
			toks = append(toks, token{kind: tokOp, text: s[i : i+1]})
			i++
		case isWordByte(c):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			toks = append(toks, token{kind: tokWord, text: s[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("%w: unexpected character %q", ErrFilter, c)
		}
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == ':' || c == '-' || c == '/' || c == '+'
}

// lexString reads a double-quoted string with C escapes (\", \\, \xNN,
// \n, \t, octal \NNN) and returns it with the number of bytes consumed.
func lexString(s string) (string, int, error) {
	var sb strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return sb.String(), i + 1, nil
		case '\\':
			i++
			if i >= len(s) {
				break
			}
			switch e := s[i]; e {
			case 'x':
				if i+2 < len(s) {
					if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
						sb.WriteByte(byte(v))
						i += 2
						continue
					}
				}
				return "", 0, fmt.Errorf("%w: bad \\x escape in string", ErrFilter)
			case 'n':
				sb.WriteByte('\n')
			case 't':
				sb.WriteByte('\t')
			case 'r':
				sb.WriteByte('\r')
			case '0', '1', '2', '3', '4', '5', '6', '7':
				j := i
				for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
					j++
				}
				v, _ := strconv.ParseUint(s[i:j], 8, 16)
				if v > 255 {
					return "", 0, fmt.Errorf("%w: bad octal escape in string", ErrFilter)
				}
				sb.WriteByte(byte(v))
				i = j - 1
			default:
				sb.WriteByte(e)
			}
		default:
			sb.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("%w: unterminated string", ErrFilter)
}

type parser struct {
	toks []token
	pos  int
}

func (ps *parser) peek() (token, bool) {
	if ps.pos < len(ps.toks) {
		return ps.toks[ps.pos], true
	}
	return token{}, false
}

func (ps *parser) isOp(texts ...string) bool {
	t, ok := ps.peek()
	if !ok {
		return false
	}
	for _, x := range texts {
		if (t.kind == tokOp || t.kind == tokWord) && t.text == x {
			return true
		}
	}
	return false
}

var errEnd = fmt.Errorf("%w: unexpected end of filter expression", ErrFilter)

func (ps *parser) parseOr() (*node, error) {
	l, err := ps.parseAnd()
	if err != nil {
		return nil, err
	}
	for ps.isOp("||", "or") {
		ps.pos++
		r, err := ps.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &node{op: opOr, left: l, right: r}
	}
	return l, nil
}

func (ps *parser) parseAnd() (*node, error) {
	l, err := ps.parseUnary()
	if err != nil {
		return nil, err
	}
	for ps.isOp("&&", "and") {
		ps.pos++
		r, err := ps.parseUnary()
		if err != nil {
			return nil, err
		}
		l = &node{op: opAnd, left: l, right: r}
	}
	return l, nil
}

func (ps *parser) parseUnary() (*node, error) {
	if ps.isOp("!", "not") {
		ps.pos++
		x, err := ps.parseUnary()
		if err != nil {
			return nil, err
		}
		return &node{op: opNot, left: x}, nil
	}
	return ps.parsePrimary()
}

var relOps = map[string]relOp{
	"==": relEq, "eq": relEq, "===": relEq, "all_eq": relEq,
	"!=": relNe, "ne": relNe,
	"~=": relAnyNe, "!==": relAnyNe, "any_ne": relAnyNe,
	"<": relLt, "lt": relLt, "<=": relLe, "le": relLe,
	">": relGt, "gt": relGt, ">=": relGe, "ge": relGe,
}

func (ps *parser) parsePrimary() (*node, error) {
	t, ok := ps.peek()
	if !ok {
		return nil, errEnd
	}
	if t.kind == tokOp && t.text == "(" {
		ps.pos++
		x, err := ps.parseOr()
		if err != nil {
			return nil, err
		}
		if !ps.isOp(")") {
			if _, ok := ps.peek(); !ok {
				return nil, errEnd
			}
			return nil, fmt.Errorf("%w: missing )", ErrFilter)
		}
		ps.pos++
		return x, nil
	}
	if t.kind != tokWord {
		return nil, fmt.Errorf("%w: unexpected %q", ErrFilter, t.text)
	}
	q := quantDefault
	if t.text == "any" || t.text == "all" {
		if ps.pos+1 < len(ps.toks) && ps.toks[ps.pos+1].kind == tokWord {
			if t.text == "any" {
				q = quantAny
			} else {
				q = quantAll
			}
			ps.pos++
			t = ps.toks[ps.pos]
		}
	}
	ps.pos++
	f, err := filterField(t.text)
	if err != nil {
		return nil, err
	}
	n := &node{op: opExists, field: f, quant: q}
	if ps.isOp("[") {
		if err := ps.parseSlice(n); err != nil {
			return nil, err
		}
	}
	if ps.isOp("in") {
		ps.pos++
		return ps.parseIn(n)
	}
	next, ok := ps.peek()
	if !ok {
		return n.presence()
	}
	rel, isRel := relOps[next.text]
	if !isRel || next.kind == tokString {
		if next.kind == tokOp && next.text == "=" {
			return nil, fmt.Errorf("%w: \"=\" is not an operator; use \"==\"", ErrFilter)
		}
		return n.presence()
	}
	ps.pos++
	lit, ok := ps.peek()
	if !ok {
		return nil, errEnd
	}
	if lit.kind == tokOp {
		return nil, fmt.Errorf("%w: expected a value after %q, got %q", ErrFilter, next.text, lit.text)
	}
	ps.pos++
	if f.IsProtocol() {
		return nil, fmt.Errorf("%w: %s is a protocol; compare one of its fields", ErrFilter, f)
	}
	v, err := parseValue(n, lit)
	if err != nil {
		return nil, err
	}
	n.op, n.rel, n.vals = opCmp, rel, []value{v}
	return n, nil
}

// presence finishes a bare field test; slices and quantifiers need a
// comparison.
func (n *node) presence() (*node, error) {
	if n.sliced {
		return nil, fmt.Errorf("%w: a slice of %s needs a comparison", ErrFilter, n.field)
	}
	return n, nil
}

func (ps *parser) parseSlice(n *node) error {
	ps.pos++ // [
	if fieldInfos[n.field].kind != kindBytes {
		return fmt.Errorf("%w: %s cannot be sliced (only byte fields can)", ErrFilter, n.field)
	}
	t, ok := ps.peek()
	if !ok {
		return errEnd
	}
	ps.pos++
	spec := t.text
	parseInt := func(s string) (int, error) {
		v, err := strconv.ParseUint(s, 10, 31)
		if err != nil {
			return 0, fmt.Errorf("%w: bad slice %q", ErrFilter, spec)
		}
		return int(v), nil
	}
	n.sliced = true
	switch {
	case strings.Contains(spec, ":"):
		a, b, _ := strings.Cut(spec, ":")
		lo, err := parseInt(a)
		if err != nil {
			return err
		}
		ln, err := parseInt(b)
		if err != nil {
			return err
		}
		n.lo, n.hi = lo, lo+ln
	case strings.Contains(spec, "-"):
		a, b, _ := strings.Cut(spec, "-")
		lo, err := parseInt(a)
		if err != nil {
			return err
		}
		hi, err := parseInt(b)
		if err != nil || hi < lo {
			return fmt.Errorf("%w: bad slice %q", ErrFilter, spec)
		}
		n.lo, n.hi = lo, hi+1
	default:
		lo, err := parseInt(spec)
		if err != nil {
			return err
		}
		n.lo, n.hi = lo, lo+1
	}
	if !ps.isOp("]") {
		return fmt.Errorf("%w: missing ] after slice", ErrFilter)
	}
	ps.pos++
	return nil
}

func (ps *parser) parseIn(n *node) (*node, error) {
	if n.field.IsProtocol() {
		return nil, fmt.Errorf("%w: %s is a protocol; use one of its fields with \"in\"", ErrFilter, n.field)
	}
	if !ps.isOp("{") {
		return nil, fmt.Errorf("%w: expected { after \"in\"", ErrFilter)
	}
	ps.pos++
	n.op = opIn
	for {
		t, ok := ps.peek()
		if !ok {
			return nil, errEnd
		}
		if t.kind == tokOp && t.text == "}" {
			ps.pos++
			break
		}
		if t.kind == tokOp {
			return nil, fmt.Errorf("%w: unexpected %q in set", ErrFilter, t.text)
		}
		ps.pos++
		v, err := parseValue(n, t)
		if err != nil {
			return nil, err
		}
		n.vals = append(n.vals, v)
		if ps.isOp(",") {
			ps.pos++
		} else if !ps.isOp("}") {
			return nil, fmt.Errorf("%w: separate set members with commas", ErrFilter)
		}
	}
	if len(n.vals) == 0 {
		return nil, fmt.Errorf("%w: empty set", ErrFilter)
	}
	return n, nil
}

// filterField resolves a field or protocol name, with goroce's "roce"
// alias for the InfiniBand protocol.
func filterField(name string) (Field, error) {
	if name == "roce" {
		return ProtoInfiniband, nil
	}
	if f, ok := FieldByName(name); ok {
		return f, nil
	}
	return 0, fmt.Errorf("%w: %q is neither a field nor a protocol name goroce knows (list them with: goroce cap -G fields)", ErrFilter, name)
}

// parseValue converts a literal for comparison with n's field.
func parseValue(n *node, t token) (value, error) {
	f := n.field
	fi := &fieldInfos[f]
	s := t.text
	bad := func(why string) (value, error) {
		return value{}, fmt.Errorf("%w: %q is not a valid value for %s (%s)", ErrFilter, s, f, why)
	}
	v := value{pf: -1}
	switch fi.kind {
	case kindUint, kindHex, kindBool:
		if t.kind == tokString {
			return bad("a number is expected")
		}
		if fi.kind == kindBool {
			switch strings.ToLower(s) {
			case "true":
				v.u = 1
				return v, nil
			case "false":
				v.u = 0
				return v, nil
			}
		}
		u, err := parseUint(s)
		if err != nil {
			return bad("a decimal, 0x hex or 0-prefixed octal integer is expected")
		}
		if fi.bits < 64 && u>>fi.bits != 0 {
			return value{}, fmt.Errorf("%w: %s is too big for %s (maximum %d)", ErrFilter, s, f, uint64(1)<<fi.bits-1)
		}
		v.u = u
	case kindStatus:
		switch strings.ToLower(s) {
		case "good", "1":
			v.u = 1
		case "bad", "0":
			v.u = 0
		default:
			return bad(`"good" or "bad" is expected`)
		}
	case kindRelTime:
		ns, err := parseSeconds(s)
		if err != nil || t.kind == tokString {
			return bad("seconds are expected, e.g. 1.5")
		}
		v.u = uint64(ns)
	case kindIPv4:
		addr, pfx, err := parseAddr(s)
		if err != nil || !addr.Is4() || (pfx > 32) {
			return bad("an IPv4 address or a.b.c.d/n is expected")
		}
		a := addr.As4()
		v.u = uint64(a[0])<<24 | uint64(a[1])<<16 | uint64(a[2])<<8 | uint64(a[3])
		v.pf = pfx
	case kindIPv6:
		addr, pfx, err := parseAddr(s)
		if err != nil || addr.Is4() || pfx > 128 {
			return bad("an IPv6 address or prefix is expected")
		}
		a := addr.As16()
		v.b, v.pf = a[:], pfx
	case kindBytes:
		if t.kind == tokString {
			v.b = []byte(s)
			return v, nil
		}
		b, err := parseBytes(s)
		if err != nil {
			return bad("bytes are expected as aa:bb:cc, aa-bb-cc or aabbcc")
		}
		v.b = b
	default:
		return bad("the field has no value")
	}
	return v, nil
}

// parseUint parses decimal, 0x hex, 0b binary and 0-prefixed octal (as
// tshark does: "021" is 17).
func parseUint(s string) (uint64, error) {
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		return strconv.ParseUint(s[2:], 16, 64)
	case len(s) > 2 && (s[:2] == "0b" || s[:2] == "0B"):
		return strconv.ParseUint(s[2:], 2, 64)
	case len(s) > 1 && s[0] == '0':
		return strconv.ParseUint(s[1:], 8, 64)
	}
	return strconv.ParseUint(s, 10, 64)
}

// parseSeconds parses a decimal number of seconds into nanoseconds.
func parseSeconds(s string) (int64, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, errors.New("not a number")
	}
	r.Mul(r, big.NewRat(1e9, 1))
	f, _ := r.Float64()
	if math.IsInf(f, 0) || math.Abs(f) > math.MaxInt64/2 {
		return 0, errors.New("out of range")
	}
	q := new(big.Int).Quo(r.Num(), r.Denom())
	return q.Int64(), nil
}

// parseAddr parses an address with an optional /prefix (-1 when absent).
func parseAddr(s string) (netip.Addr, int, error) {
	if a, p, ok := strings.Cut(s, "/"); ok {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return netip.Addr{}, 0, err
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return netip.Addr{}, 0, errors.New("bad prefix")
		}
		return addr, n, nil
	}
	addr, err := netip.ParseAddr(s)
	return addr, -1, err
}

// parseBytes parses aa:bb:cc, aa-bb-cc, aa.bb.cc, aabbcc, or a 0x-prefixed
// hex number, as bytes.
func parseBytes(s string) ([]byte, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	for _, sep := range []string{":", "-", "."} {
		if strings.Contains(s, sep) {
			parts := strings.Split(s, sep)
			out := make([]byte, 0, len(parts))
			for _, p := range parts {
				if len(p) == 0 || len(p) > 2 {
					return nil, errors.New("bad byte")
				}
				v, err := strconv.ParseUint(p, 16, 8)
				if err != nil {
					return nil, err
				}
				out = append(out, byte(v))
			}
			return out, nil
		}
	}
	if len(s) == 1 {
		s = "0" + s
	}
	if len(s)%2 != 0 {
		return nil, errors.New("odd number of hex digits")
	}
	return hex.DecodeString(s)
}
