package capfmt

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Occurrence selects which occurrences of a repeated field -T fields
// prints (tshark -E occurrence=f|l|a).
type Occurrence uint8

// Occurrence values.
const (
	OccurrenceAll   Occurrence = iota // every occurrence, joined by the aggregator
	OccurrenceFirst                   // the first one
	OccurrenceLast                    // the last one
)

// FieldsOptions are tshark's -E options for -T fields. The zero value is
// not tshark's default; use DefaultFieldsOptions.
type FieldsOptions struct {
	Header     bool       // -E header=y: a first line with the field names
	Separator  string     // -E separator: between columns (tshark default TAB)
	Occurrence Occurrence // -E occurrence
	Aggregator string     // -E aggregator: between occurrences (default ",")
	Quote      byte       // -E quote: 0, '"' or '\'' around non-empty values
	BOM        bool       // -E bom=y: a UTF-8 byte order mark first
}

// DefaultFieldsOptions returns tshark's defaults: no header, TAB, all
// occurrences joined by ",", no quotes.
func DefaultFieldsOptions() FieldsOptions {
	return FieldsOptions{Separator: "\t", Occurrence: OccurrenceAll, Aggregator: ","}
}

// ErrBadOption is returned (wrapped) by ParseFieldsOption for an -E option
// tshark would reject.
var ErrBadOption = errors.New("invalid -E option")

// ParseFieldsOption applies one tshark -E option ("header=y",
// "separator=/t", "occurrence=f", "aggregator=/s", "quote=d", "bom=y").
func (o *FieldsOptions) ParseFieldsOption(opt string) error {
	name, val, ok := strings.Cut(opt, "=")
	if !ok {
		return fmt.Errorf("%w: %q (want name=value)", ErrBadOption, opt)
	}
	yn := func() (bool, error) {
		switch val {
		case "y", "Y":
			return true, nil
		case "n", "N":
			return false, nil
		}
		return false, fmt.Errorf("%w: %s=%q (want y or n)", ErrBadOption, name, val)
	}
	var err error
	switch name {
	case "header":
		o.Header, err = yn()
	case "bom":
		o.BOM, err = yn()
	case "separator":
		o.Separator, err = sepValue(name, val)
	case "aggregator":
		o.Aggregator, err = sepValue(name, val)
	case "occurrence":
		switch val {
		case "a":
			o.Occurrence = OccurrenceAll
		case "f":
			o.Occurrence = OccurrenceFirst
		case "l":
			o.Occurrence = OccurrenceLast
		default:
			err = fmt.Errorf("%w: occurrence=%q (want f, l or a)", ErrBadOption, val)
		}
	case "quote":
		switch val {
		case "d":
			o.Quote = '"'
		case "s":
			o.Quote = '\''
		case "n":
			o.Quote = 0
		default:
			err = fmt.Errorf("%w: quote=%q (want d, s or n)", ErrBadOption, val)
		}
	default:
		err = fmt.Errorf("%w: %q (known: header, separator, occurrence, aggregator, quote, bom)", ErrBadOption, name)
	}
	return err
}

func sepValue(name, val string) (string, error) {
	switch val {
	case "/t":
		return "\t", nil
	case "/s":
		return " ", nil
	case "":
		return "", fmt.Errorf("%w: %s is empty", ErrBadOption, name)
	}
	return val, nil
}

// FieldsWriter writes packets as tshark -T fields does: one line per
// packet, one column per field. It buffers nothing itself beyond a scratch
// line; give it a bufio.Writer for speed.
type FieldsWriter struct {
	w      io.Writer
	fields []Field
	opt    FieldsOptions
	line   []byte
	// The occurrences of each wanted field in the current packet form a
	// chain through next: head[f] is the first item index, tail[f] the
	// last, next[i] the one after item i (-1 ends a chain).
	head, tail [numFields]int32
	next       []int32
	wanted     [numFields]bool
}

// NewFieldsWriter returns a writer for the given columns.
func NewFieldsWriter(w io.Writer, fields []Field, opt FieldsOptions) *FieldsWriter {
	fw := &FieldsWriter{w: w, fields: append([]Field(nil), fields...), opt: opt}
	for _, f := range fields {
		if f < numFields {
			fw.wanted[f] = true
		}
	}
	return fw
}

// WriteHeader writes the BOM and header line the options ask for; call it
// once before the first packet (tshark prints them even for no packets).
func (fw *FieldsWriter) WriteHeader() error {
	fw.line = fw.line[:0]
	if fw.opt.BOM {
		fw.line = append(fw.line, 0xef, 0xbb, 0xbf)
	}
	if fw.opt.Header {
		for i, f := range fw.fields {
			if i > 0 {
				fw.line = append(fw.line, fw.opt.Separator...)
			}
			fw.line = append(fw.line, f.String()...)
		}
		fw.line = append(fw.line, '\n')
	}
	if len(fw.line) == 0 {
		return nil
	}
	_, err := fw.w.Write(fw.line)
	return err
}

// Write writes one packet's line.
func (fw *FieldsWriter) Write(p *Packet) error {
	for _, f := range fw.fields {
		if f < numFields {
			fw.head[f] = -1
		}
	}
	if cap(fw.next) < len(p.Items) {
		fw.next = make([]int32, len(p.Items), 2*len(p.Items))
	}
	next := fw.next[:len(p.Items)]
	for i := range p.Items {
		f := p.Items[i].Field
		if !fw.wanted[f] {
			continue
		}
		next[i] = -1
		if fw.head[f] < 0 {
			fw.head[f] = int32(i)
		} else {
			next[fw.tail[f]] = int32(i)
		}
		fw.tail[f] = int32(i)
	}
	line := fw.line[:0]
	sep, agg, quote := fw.opt.Separator, fw.opt.Aggregator, fw.opt.Quote
	for c, f := range fw.fields {
		if c > 0 {
			line = append(line, sep...)
		}
		if f >= numFields || fw.head[f] < 0 {
			continue
		}
		i := fw.head[f]
		switch fw.opt.Occurrence {
		case OccurrenceFirst:
			next[fw.head[f]] = -1
		case OccurrenceLast:
			i = fw.tail[f]
		}
		if quote != 0 {
			line = append(line, quote)
		}
		for k := 0; i >= 0; k, i = k+1, next[i] {
			if k > 0 {
				line = append(line, agg...)
			}
			line = AppendValue(line, &p.Items[i])
		}
		if quote != 0 {
			line = append(line, quote)
		}
	}
	line = append(line, '\n')
	fw.line = line
	_, err := fw.w.Write(line)
	return err
}
