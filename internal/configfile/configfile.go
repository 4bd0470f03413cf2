// Package configfile is the one strict way gpuwatch reads a YAML
// configuration file. Every loader (analyzer thresholds, report and SMTP,
// teams, simulator scenarios, reclamation policy) goes through it, so that
// all of them refuse the same things the same way:
//
//   - a file that is not a regular file (a FIFO would hang, /dev/zero would
//     never end) or is larger than MaxBytes;
//   - more than one YAML document (a "---" would silently hide the rest);
//   - keys the target type does not have, with "did you mean" for near misses;
//   - NaN and infinities, which pass every range check and mean nothing;
//   - values of the wrong type.
//
// Every problem is collected, not only the first, and each reads
// "file:line: key.path: problem" (key paths join map keys with "." and list
// indexes as "[i]": "tiers[0].match.team"). Durations have one syntax,
// Prometheus' ("90s", "1h30m", "1d", "2w"), through Duration.
package configfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"
)

// MaxBytes bounds a configuration file. The largest real one (a policy
// with many tiers, a scenario of a big fleet) is a few tens of kilobytes.
const MaxBytes = 1 << 20

// ReadFile reads a configuration file without blocking on a FIFO or
// reading a device without end: only a regular file of at most MaxBytes.
func ReadFile(path string) ([]byte, error) { return ReadFileChecked(path, nil) }

// ReadFileChecked is ReadFile with one more check of the opened file (its
// mode and owner, for a secret), made on the file that is then read, so
// that nothing swapped in between the check and the read escapes it.
func ReadFileChecked(path string, check func(os.FileInfo) error) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, st.Mode().Type())
	}
	if check != nil {
		if err := check(st); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if st.Size() > MaxBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than the limit of %d", path, st.Size(), MaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%s: more than the limit of %d bytes", path, MaxBytes)
	}
	return data, nil
}

// Error is one problem of a configuration file.
type Error struct {
	File string
	Line int    // 0 when unknown
	Path string // key path, "" for the whole document
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	if e.Path != "" {
		b.WriteString(": " + e.Path)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Errors are every problem found in a file, in line order.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap lets errors.As find each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Err returns es as an error, nil when empty, sorted by line.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].Line < es[j].Line })
	return es
}

// Doc is a parsed file: it locates key paths for the loaders' own checks.
type Doc struct {
	File  string
	Root  *yaml.Node // the document's top node; nil for an empty file
	paths map[string]*yaml.Node
	keys  map[string]int // key path -> line of the key itself
	// Warnings are "file:line: key.path: ..." notes on keys still accepted
	// under an old name (Options.Renamed).
	Warnings []string

	renamed map[string]string
	lines   map[int]string  // line -> deepest key path starting on it
	shallow map[int]string  // line -> shortest key path starting on it
	spots   map[spot]string // where a value starts -> its key path
}

// spot is a line and column: several values share a line in flow style
// ("{url: x, format: y}"), and a field type's error names its own.
type spot struct{ line, column int }

// Line returns the line of a key path, or of its nearest parent present.
func (d *Doc) Line(path string) int {
	for p := path; ; {
		if l, ok := d.keys[p]; ok {
			return l
		}
		if n, ok := d.paths[p]; ok {
			return n.Line
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			if d.Root != nil {
				return d.Root.Line
			}
			return 0
		}
		p = p[:i]
	}
}

// Errorf builds the Error of a key path.
func (d *Doc) Errorf(path, format string, args ...any) *Error {
	return &Error{File: d.File, Line: d.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Load reads path with ReadFile and decodes it with Decode.
func Load(path string, out any) (*Doc, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, Errors{{File: path, Msg: unwrapPath(err, path)}}
	}
	return Decode(path, data, out)
}

func unwrapPath(err error, path string) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return strings.TrimPrefix(err.Error(), path+": ")
}

// Options adjust Decode.
type Options struct {
	// Renamed maps an old key name to its new one: the old name is still
	// read, with a deprecation warning in Doc.Warnings.
	Renamed map[string]string
}

// Decode parses one YAML document into out, a pointer to the target (its
// current content is the default that keys left out keep). On failure the
// error is Errors, every problem found.
func Decode(file string, data []byte, out any) (*Doc, error) {
	return DecodeWith(file, data, out, Options{})
}

// DecodeWith is Decode with options.
func DecodeWith(file string, data []byte, out any, o Options) (*Doc, error) {
	doc := &Doc{File: file, renamed: o.Renamed, paths: map[string]*yaml.Node{}, keys: map[string]int{}, lines: map[int]string{}, shallow: map[int]string{}, spots: map[spot]string{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var top yaml.Node
	if err := dec.Decode(&top); err != nil {
		if errors.Is(err, io.EOF) {
			return doc, nil // empty: every default
		}
		return doc, Errors{syntaxError(file, data, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			line = lineOf(err.Error())
		}
		return doc, Errors{{File: file, Line: line, Msg: "more than one YAML document: a file holds exactly one (remove the extra ---)"}}
	}
	if len(top.Content) == 0 {
		return doc, nil
	}
	if err := screenAliases(&top); err != nil {
		return doc, Errors{{File: file, Line: lineOf(err.Error()), Msg: stripLine(err.Error())}}
	}
	doc.Root = top.Content[0]
	var errs Errors
	doc.walk(doc.Root, "", reflect.TypeOf(out), &errs)
	if len(errs) > 0 {
		return doc, errs.Err()
	}
	if err := doc.Root.Decode(out); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, m := range te.Errors {
				errs = append(errs, doc.at(m))
			}
		} else {
			errs = append(errs, doc.at(err.Error()))
		}
	}
	return doc, errs.Err()
}

// MaxExpandedNodes bounds the nodes a document stands for once its
// aliases are expanded. Anchors and aliases are legitimate YAML (a shared
// tier, a repeated label set), but nine nested levels of ten aliases each
// ("billion laughs") stand for a billion nodes in a file of a kilobyte:
// every decoder that expands them runs for minutes and takes gigabytes.
const MaxExpandedNodes = 100_000

// screenAliases refuses a document whose aliases expand past
// MaxExpandedNodes. The count is memoized per node, so the screen itself
// is linear in the file however deep the nesting.
func screenAliases(top *yaml.Node) error {
	memo := map[*yaml.Node]int{}
	var size func(n *yaml.Node, depth int) int
	size = func(n *yaml.Node, depth int) int {
		if n == nil {
			return 0
		}
		if v, ok := memo[n]; ok {
			return v
		}
		if depth > 1000 {
			return MaxExpandedNodes + 1 // an alias cycle, or nesting no config has
		}
		memo[n] = MaxExpandedNodes + 1 // a cycle through n counts as too many
		total := 1
		if n.Kind == yaml.AliasNode {
			total += size(n.Alias, depth+1)
		}
		for _, c := range n.Content {
			total += size(c, depth+1)
			if total > MaxExpandedNodes {
				break
			}
		}
		memo[n] = min(total, MaxExpandedNodes+1)
		return memo[n]
	}
	if size(top, 0) > MaxExpandedNodes {
		return fmt.Errorf("line %d: YAML aliases expand this document to more than %d nodes: refused (an alias bomb?)", top.Line, MaxExpandedNodes)
	}
	return nil
}

// syntaxError is the Error of a document the YAML scanner refused. For a
// tab in the indentation, the scanner names the line where the scalar it
// was reading began, often the line above; the tab's own line is the first
// one from there whose indentation holds a tab.
func syntaxError(file string, data []byte, err error) *Error {
	line, msg := lineOf(err.Error()), stripLine(err.Error())
	if strings.Contains(msg, "tab character") {
		line = tabIndentedLine(data, line)
		msg += " (YAML indents with spaces only)"
	}
	return &Error{File: file, Line: line, Msg: msg}
}

// tabIndentedLine is the first line, from line from (1-based) on, whose
// leading blanks hold a tab; from when there is none.
func tabIndentedLine(data []byte, from int) int {
	for i, l := range strings.Split(string(data), "\n") {
		if i+1 < from {
			continue
		}
		if indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]; strings.Contains(indent, "\t") {
			return i + 1
		}
	}
	return from
}

var lineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

func lineOf(msg string) int {
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func stripLine(msg string) string { return lineRE.ReplaceAllString(msg, "") }

// at turns a decoder message ("line 3: cannot unmarshal ...") into an
// Error naming the key path of that line: the innermost one, unless a whole
// map or list was the wrong type, which the outermost key on the line holds.
// A FieldError names its value's column too, which picks the key among
// several on one line.
func (d *Doc) at(msg string) *Error {
	line := lineOf(msg)
	msg = stripLine(msg)
	path := d.lines[line]
	if strings.Contains(msg, "unmarshal !!map") || strings.Contains(msg, "unmarshal !!seq") {
		path = d.shallow[line]
	}
	if m := columnRE.FindStringSubmatch(msg); m != nil {
		col, _ := strconv.Atoi(m[1])
		if p, ok := d.spots[spot{line, col}]; ok {
			path = p
		}
		msg = msg[len(m[0]):]
	}
	return &Error{File: d.File, Line: line, Path: path, Msg: msg}
}

var columnRE = regexp.MustCompile(`^column (\d+): `)

var (
	unmarshaler = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	// nodeType is a field left as raw YAML for the loader to check itself:
	// any key is accepted below it.
	nodeType = reflect.TypeOf(yaml.Node{})
)

// walk records every key path with its node, refuses NaN and infinities,
// and checks mapping keys against the fields of t (nil: anything goes).
func (d *Doc) walk(n *yaml.Node, path string, t reflect.Type, errs *Errors) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if path != "" {
		d.paths[path] = n
		d.spots[spot{n.Line, n.Column}] = path
		if _, ok := d.lines[n.Line]; !ok || len(path) > len(d.lines[n.Line]) {
			d.lines[n.Line] = path
		}
		if _, ok := d.shallow[n.Line]; !ok || len(path) < len(d.shallow[n.Line]) {
			d.shallow[n.Line] = path
		}
	}
	for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface) {
		if t.Kind() == reflect.Interface {
			t = nil
			break
		}
		if t.Implements(unmarshaler) {
			break
		}
		t = t.Elem()
	}
	if t == nodeType {
		t = nil
	}
	custom := t != nil && (t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler))
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!float" && special(n.Value) {
			*errs = append(*errs, &Error{File: d.File, Line: n.Line, Path: path, Msg: fmt.Sprintf("%s is not a number this file accepts (NaN and infinities are refused)", n.Value)})
		}
	case yaml.SequenceNode:
		var elem reflect.Type
		if t != nil && !custom && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i, c := range n.Content {
			d.walk(c, fmt.Sprintf("%s[%d]", path, i), elem, errs)
		}
	case yaml.MappingNode:
		fields, known := fieldsOf(t, custom)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "<<" {
				d.walk(v, path, t, errs)
				continue
			}
			if nw, old := d.renamed[k.Value]; old && known {
				if _, ok := fields[nw]; ok {
					d.Warnings = append(d.Warnings, fmt.Sprintf("%s:%d: %s: %q is deprecated, write %q", d.File, k.Line, join(path, nw), k.Value, nw))
					k.Value = nw // the decoder then reads it under the new name
				}
			}
			p := join(path, k.Value)
			d.keys[p] = k.Line
			var ft reflect.Type
			if known {
				f, ok := fields[k.Value]
				if !ok {
					msg := fmt.Sprintf("unknown key %q", k.Value)
					if s := suggest(k.Value, fields); s != "" {
						msg += fmt.Sprintf(" (did you mean %q?)", s)
					}
					*errs = append(*errs, &Error{File: d.File, Line: k.Line, Path: p, Msg: msg})
					continue
				}
				ft = f
			} else if t != nil && !custom && t.Kind() == reflect.Map {
				ft = t.Elem()
			}
			d.walk(v, p, ft, errs)
		}
	}
}

// special is true for a float scalar that is NaN or infinite (".nan",
// "-.Inf", and anything else yaml.v3 resolves that way, such as "1e999").
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// special is true for a float scalar that is NaN or infinite.
func special(v string) bool {
	var f float64
	if err := yaml.Unmarshal([]byte(v), &f); err != nil {
		return false
	}
	return math.IsNaN(f) || math.IsInf(f, 0)
}

// fieldsOf lists the YAML keys of a struct type (inline structs included);
// known is false when t is not a plain struct (maps, custom unmarshalers).
func fieldsOf(t reflect.Type, custom bool) (map[string]reflect.Type, bool) {
	if t == nil || custom || t.Kind() != reflect.Struct {
		return nil, false
	}
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(opts, "inline") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			inner, ok := fieldsOf(ft, false)
			if !ok {
				return nil, false // an inline map takes any key
			}
			for k, v := range inner {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out, true
}

// suggest returns the known key nearest to k when it is a likely typo.
func suggest(k string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d := distance(strings.ToLower(k), n)
		if d < bestD || strings.EqualFold(strings.ReplaceAll(k, "_", ""), strings.ReplaceAll(n, "_", "")) {
			best, bestD = n, d
			if d == 0 {
				break
			}
		}
	}
	return best
}

// distance is the Levenshtein distance of two keys.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
