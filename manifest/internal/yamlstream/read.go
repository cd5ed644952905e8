package yamlstream

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"gridweave.dev/manifest/internal/jsontree"
	"gridweave.dev/manifest/internal/strictyaml"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sjson "k8s.io/apimachinery/pkg/util/json"
)

// Document is one object read from a stream, with where it came from.
type Document struct {
	Source string // "file.yaml#2" (1-based document index)
	Object *unstructured.Unstructured
	// Err is set when the document is not a Kubernetes object.
	Err error
	// Lines maps each field path of the object ("spec.ports[0].port") to
	// its line in the source, when the document was read from YAML; Lint
	// uses it to give each finding a line.
	Lines map[string]int
}

// ReadDocuments splits a multi-document YAML (or JSON) stream into
// objects. Empty documents are skipped; a document that is not a mapping
// with apiVersion and kind is returned with Err set. A List's items are
// returned one by one.
func ReadDocuments(name string, r io.Reader) ([]Document, error) {
	dr := NewDocumentReader(name, r)
	var out []Document
	for {
		d, err := dr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
}

// LoadDocuments reads the YAML (or JSON) documents of a file; the sources
// of its documents are "path#N".
func LoadDocuments(path string) ([]Document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadDocuments(path, f)
}

// DocumentReader reads the objects of a YAML (or JSON) stream one at a
// time, so that what is held at once is one document's text and the
// objects in flight, never the stream's objects or its whole YAML tree.
//
// The stream is cut into documents at its `---` and `...` lines (which
// YAML allows nowhere else at the start of a line). A List written in
// block style — `items:` at the start of a line, then its items as `- `
// lines — is cut into its items the same way, and the items are read a
// window at a time on every CPU: a List of 100,000 objects never becomes
// one tree of YAML nodes. The cut is checked: any item that does not read
// as a mapping on its own (an alias to another item, a quoted string or a
// flow collection the cut went through, ...) sends the rest of the List to
// the reading of the whole document as one YAML tree, which is what
// DocumentReader does with every other document.
type DocumentReader struct {
	name  string
	in    *bufio.Reader
	line  int    // lines of the stream read so far
	carry []byte // a `---` line read that starts the next document
	index int    // documents started so far: the N of "name#N"
	// started: a document was read (yaml then wants each next one to
	// start with a --- line).
	started bool
	ready   []Document
	list    *blockList // the List whose items are being read, if any
	err     error      // what ended the stream (io.EOF at its end)
}

// NewDocumentReader reads the documents of r; their sources are "name#N".
func NewDocumentReader(name string, r io.Reader) *DocumentReader {
	return &DocumentReader{name: name, in: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next object (or a document that is not one, with Err
// set), or io.EOF after the last. Any other error is the stream's.
func (d *DocumentReader) Next() (Document, error) {
	for len(d.ready) == 0 {
		if d.list != nil {
			d.ready = d.list.nextWindow()
			if d.list.done() {
				d.list = nil
			}
			continue
		}
		if d.err != nil {
			return Document{}, d.err
		}
		d.readDocuments()
	}
	doc := d.ready[0]
	d.ready[0] = Document{}
	d.ready = d.ready[1:]
	return doc, nil
}

// readDocuments reads the stream's next documents, up to a window of them
// or up to a List written in block style (which is then cut into its
// items), each document read on its own, on every CPU, into d.ready in
// their order.
func (d *DocumentReader) readDocuments() {
	type pending struct {
		text         []byte
		first, index int
		docs         []Document
		extra        int // documents yaml's reading found beyond the first
	}
	var batch []*pending
	size := 0
	for len(batch) < listWindow && size < 8<<20 && d.err == nil {
		p, ok := d.nextText()
		switch {
		case !ok:
			continue
		case p.bareEnd && d.started:
			continue // yaml skips a `...` after a document's end
		case p.bareEnd:
			// and refuses one before any document.
			d.index++
			d.started = true
			batch = append(batch, &pending{index: d.index, docs: []Document{{Source: fmt.Sprintf("%s#%d", d.name, d.index),
				Err: errors.New("not YAML: yaml: did not find expected node content")}}})
			continue
		}
		d.index++
		if d.started && !p.explicit && !p.whole {
			// After the first document, yaml wants each to start with ---.
			line := cmp.Or(p.content, p.first)
			batch = append(batch, &pending{index: d.index, docs: []Document{{Source: fmt.Sprintf("%s#%d", d.name, d.index),
				Err: fmt.Errorf("not YAML: yaml: line %d: did not find expected <document start>", line)}}})
			continue
		}
		d.started = true
		if list := cmp.Or(cutBlockList(p.text, p.first, d.name, &d.index), cutJSONList(p.text, p.first, d.name, &d.index)); list != nil {
			d.list = list
			break
		}
		batch = append(batch, &pending{text: p.text, first: p.first, index: d.index})
		size += len(p.text)
	}
	parallel(len(batch), func(i int) {
		p := batch[i]
		if p.text == nil {
			return // read already
		}
		defer recoverRead(&p.docs, fmt.Sprintf("%s#%d", d.name, p.index))
		n := p.index
		p.docs = readTree(p.text, p.first, d.name, &n, 0)
		p.extra, p.text = n-p.index, nil
	})
	shift := 0
	for _, p := range batch {
		if shift > 0 {
			for i := range p.docs {
				p.docs[i].Source = renumber(p.docs[i].Source, d.name, shift)
			}
		}
		d.ready = append(d.ready, p.docs...)
		shift += p.extra
	}
	if shift > 0 {
		d.index += shift
		if d.list != nil {
			d.list.src = fmt.Sprintf("%s#%d", d.name, d.index)
		}
	}
}

// recoverRead turns a panic in reading a document (on a reader's
// goroutine, which no caller could recover) into that document's error.
func recoverRead(docs *[]Document, src string) {
	if r := recover(); r != nil {
		*docs = []Document{{Source: src, Err: fmt.Errorf("reading this document failed: %v", r)}}
	}
}

// renumber moves the document number N of a source "name#N..." on by
// shift.
func renumber(source, name string, shift int) string {
	rest := strings.TrimPrefix(source, name+"#")
	digits := 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	n, _ := strconv.Atoi(rest[:digits])
	return fmt.Sprintf("%s#%d%s", name, n+shift, rest[digits:])
}

// piece is the text of one document of the stream, as nextText cuts it.
type piece struct {
	text  []byte
	first int // the line text starts on
	// explicit: it starts with a `---` line; content is the first line
	// that is neither blank, a comment nor a directive (0: none).
	explicit bool
	content  int
	// bareEnd: nothing but a `...` line (and comments).
	bareEnd bool
	// whole: the rest of the stream, to be read by yaml's decoder alone.
	whole bool
}

// nextText reads the text of the next document. ok is false for text that
// is no document (comments, blank lines) and at the end of the stream
// (d.err is then set).
func (d *DocumentReader) nextText() (p piece, ok bool) {
	p.first = d.line + 1
	if d.carry != nil {
		p.text, d.carry = d.carry, nil
		p.first = d.line
		p.explicit = true
	}
	for {
		line, err := d.readLine()
		if oddLineBreak(line) {
			// YAML breaks lines there too, and lines here are cut at \n
			// alone: the rest of the stream is read as one text, by yaml's
			// decoder.
			rest, readErr := io.ReadAll(d.in)
			p.text = append(append(p.text, line...), rest...)
			p.whole = true
			d.err = cmp.Or(err, readErr, io.EOF)
			var node yaml.Node
			return p, yaml.NewDecoder(bytes.NewReader(p.text)).Decode(&node) != io.EOF
		}
		if len(line) > 0 {
			switch documentMarker(line) {
			case "---":
				if p.explicit || p.content > 0 {
					d.carry = line
					return p, true
				}
				p.explicit = true
			case "...":
				p.text = append(p.text, line...)
				p.bareEnd = !p.explicit && p.content == 0
				return p, p.explicit || p.content > 0 || p.bareEnd || !quietText(p.text)
			default:
				if p.content == 0 && !blankOrComment(line) && line[0] != '%' {
					p.content = d.line
				}
			}
			p.text = append(p.text, line...)
		}
		if err != nil {
			d.err = err
			return p, p.explicit || p.content > 0 || !quietText(p.text)
		}
	}
}

// oddLineBreak reports whether a line holds a line break other than \n
// (or \r\n): a carriage return alone, or NEL, LS or PS, which YAML counts
// as line breaks too.
func oddLineBreak(line []byte) bool {
	for i, c := range line {
		if c == '\r' && (i+1 == len(line) || line[i+1] != '\n') {
			return true
		}
	}
	return bytes.Contains(line, []byte("\u0085")) || bytes.Contains(line, []byte("\u2028")) || bytes.Contains(line, []byte("\u2029"))
}

// quietText reports whether text that holds no document (comments, blank
// lines) reads as YAML; text that does not is a document, with an error.
func quietText(text []byte) bool {
	var node yaml.Node
	return yaml.Unmarshal(text, &node) == nil
}

// readLine reads one line with its newline (a copy: the reader's buffer is
// reused).
func (d *DocumentReader) readLine() ([]byte, error) {
	var line []byte
	for {
		part, err := d.in.ReadSlice('\n')
		line = append(line, part...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if len(line) > 0 {
			d.line++
		}
		return line, err
	}
}

// documentMarker is "---" or "..." when line starts or ends a document.
func documentMarker(line []byte) string {
	if len(line) < 3 || (!bytes.HasPrefix(line, []byte("---")) && !bytes.HasPrefix(line, []byte("..."))) {
		return ""
	}
	if len(line) > 3 && !isSpace(line[3]) {
		return ""
	}
	return string(line[:3])
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// blankOrComment reports whether a line holds nothing but a comment.
func blankOrComment(line []byte) bool {
	rest := bytes.TrimLeft(bytes.TrimPrefix(line, []byte("\ufeff")), " \t\r\n")
	return len(rest) == 0 || rest[0] == '#'
}

// readTree reads a document's text as YAML trees (readNode): one, or
// more where yaml's reading finds a document starting without a `---`
// line. *index is the number of the first and is moved on past the
// others; first is the line the text starts on.
func readTree(text []byte, first int, name string, index *int, from int) []Document {
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var out []Document
	for i := 0; ; i++ {
		if i > 0 {
			*index++
		}
		src := fmt.Sprintf("%s#%d", name, *index)
		var node yaml.Node
		err := dec.Decode(&node)
		if err == io.EOF {
			if i > 0 {
				*index--
			}
			return out
		}
		if err != nil {
			return append(out, Document{Source: src, Err: fmt.Errorf("not YAML: %s", shiftErrorLines(err, first))})
		}
		shiftLines(&node, first-1)
		out = append(out, readNode(&node, src, from)...)
		from = 0
	}
}

// readNode reads a document's tree: a List's items from index from on,
// one by one, or the document's object; nothing for an empty document.
func readNode(doc *yaml.Node, src string, from int) []Document {
	if len(doc.Content) == 0 || (doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null") {
		return nil
	}
	root := doc.Content[0]
	if items := MappingValue(root, "items"); items != nil && items.Kind == yaml.SequenceNode && (listKind(root) || allMappings(items.Content)) {
		if dup := duplicateKeyOutside(root, "items"); dup != "" {
			return []Document{{Source: src, Err: fmt.Errorf("duplicate key %s", dup)}}
		}
		// A List: its items one by one, each converted on its own (the
		// List is never held as one object).
		return readItems(items, src, from)
	}
	return []Document{readObject(root, src)}
}

var errorLine = regexp.MustCompile(`^yaml: line (\d+): `)

// shiftErrorLines is a YAML error's message for text that starts on line
// first: yaml counts from the text's start, and leaves out a line it
// counts as 0 (the text's first line).
func shiftErrorLines(err error, first int) string {
	msg := err.Error()
	if m := errorLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return fmt.Sprintf("yaml: line %d: %s", n+first-1, msg[len(m[0]):])
	}
	if rest, ok := strings.CutPrefix(msg, "yaml: "); ok && !strings.HasPrefix(rest, "unmarshal errors") {
		return fmt.Sprintf("yaml: line %d: %s", first, rest)
	}
	return msg
}

// shiftLines moves every node's line down by offset (aliases are not
// followed: their targets are in the tree where they are defined).
func shiftLines(n *yaml.Node, offset int) {
	if offset == 0 {
		return
	}
	n.Line += offset
	for _, c := range n.Content {
		shiftLines(c, offset)
	}
}

// listKind reports whether a mapping's kind names a list (List,
// ConfigMapList, ...): its items are objects, and one that is not a
// mapping is an error of its own. (A document of another kind is read as
// a List only when all its items are mappings.)
func listKind(root *yaml.Node) bool {
	kind := MappingValue(root, "kind")
	return kind != nil && kind.Kind == yaml.ScalarNode && strings.HasSuffix(kind.Value, "List")
}

// allMappings reports whether every node is a mapping (aliases resolved).
func allMappings(nodes []*yaml.Node) bool {
	for _, n := range nodes {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n.Kind != yaml.MappingNode {
			return false
		}
	}
	return true
}

// readItems reads a List's items from index from on, on one worker per
// CPU when there are many, in their order; each item's YAML nodes are let
// go once read, so a huge List's tree is freed as it is converted.
func readItems(items *yaml.Node, src string, from int) []Document {
	out := make([]Document, max(len(items.Content)-from, 0))
	parallel(len(out), func(j int) {
		out[j] = readObject(items.Content[from+j], itemSource(src, from+j))
		items.Content[from+j] = nil
	})
	return out
}

func itemSource(src string, i int) string { return src + ".items[" + strconv.Itoa(i) + "]" }

// parallel runs do(0..n-1), on one worker per CPU when n is large enough
// for that to pay.
func parallel(n int, do func(int)) {
	var next atomic.Int64
	work := func() {
		for {
			j := int(next.Add(1) - 1)
			if j >= n {
				return
			}
			do(j)
		}
	}
	workers := 1
	if n >= 64 {
		workers = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// blockList is a List written in block style, cut into its items' texts.
type blockList struct {
	text  []byte
	first int // the line text starts on
	name  string
	index *int // the reader's document number: the List's
	src   string
	// starts[i] is where item i's `- ` line starts in text, line[i] its
	// line; end is where the last item ends.
	starts []int
	lines  []int
	end    int
	indent int // the column of the items' dashes (-1: a JSON List)
	// ends[i] is where item i ends, in a JSON List (between its items
	// are commas).
	ends []int
	next int // the next item to read
}

// listWindow is how many items a List reads at a time (on every CPU).
const listWindow = 512

// cutBlockList returns text as a List cut into its items, or nil when it
// is not a List written in block style with its items' dashes in one
// column, or its other keys do not read as a mapping with `items` empty
// once the items are cut out (the whole document is then read as one).
func cutBlockList(text []byte, first int, name string, index *int) *blockList {
	if !printable(text) {
		return nil // yaml refuses it wherever it is, in a comment too
	}
	l := &blockList{text: text, first: first, name: name, index: index, src: fmt.Sprintf("%s#%d", name, *index), indent: -1}
	itemsLine := 0 // the `items:` line, counted from 1 in text
	regionStart := -1
	line, pos := 0, 0
	for pos < len(text) {
		line++
		end := bytes.IndexByte(text[pos:], '\n') + 1
		if end == 0 {
			end = len(text) - pos
		}
		s := text[pos : pos+end]
		switch {
		case itemsLine == 0:
			if isItemsKey(s) {
				itemsLine = line
				regionStart = pos + end
			}
		case blankOrComment(s):
		default:
			indent := leadingSpaces(s)
			if indent < len(s) && s[indent] == '\t' {
				return nil
			}
			dash := indent < len(s) && s[indent] == '-' && (indent+1 == len(s) || isSpace(s[indent+1]))
			if l.indent < 0 {
				if !dash {
					return nil
				}
				l.indent = indent
			}
			if dash && indent == l.indent {
				l.starts = append(l.starts, pos)
				l.lines = append(l.lines, first+line-1)
			} else if indent <= l.indent {
				l.end = pos
				return l.checkHeader(regionStart, itemsLine)
			}
		}
		pos += end
	}
	if l.indent < 0 {
		return nil
	}
	l.end = len(text)
	return l.checkHeader(regionStart, itemsLine)
}

// checkHeader reads the document with its items cut out: it must be a
// block mapping at the first column whose `items` (on itemsLine) is
// empty, without duplicate keys. l is returned when it is.
func (l *blockList) checkHeader(regionStart, itemsLine int) *blockList {
	region := l.text[regionStart:l.end]
	header := make([]byte, 0, len(l.text)-len(region)+bytes.Count(region, []byte("\n")))
	header = append(header, l.text[:regionStart]...)
	header = append(header, bytes.Repeat([]byte("\n"), bytes.Count(region, []byte("\n")))...)
	header = append(header, l.text[l.end:]...)
	node, ok := readOneDocument(header)
	if !ok || len(node.Content) != 1 {
		return nil
	}
	root := node.Content[0]
	if root.Kind != yaml.MappingNode || root.Style&yaml.FlowStyle != 0 || root.Column != 1 {
		return nil
	}
	found := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "items" {
			if k.Line != itemsLine || k.Column != 1 || v.Kind != yaml.ScalarNode || v.Tag != "!!null" || v.Value != "" {
				return nil
			}
			found = true
		}
	}
	if !found || !listKind(root) || duplicateKey(root, "") != "" {
		return nil // the whole document, read as one, says what it is
	}
	return l
}

// readItem reads a List item's text (its dash blanked) as one YAML
// document, ok false when it is not exactly one. A block mapping ends
// only at a line indented less than it (indentedUnder), so it is read
// without a look for a second document; anything else — a flow mapping,
// after which yaml's reading starts a new document at any token — is read
// with that look.
func readItem(item []byte) (*yaml.Node, bool) {
	if flowRoot(item) {
		return readOneDocument(item)
	}
	if !indentedUnder(item) {
		return nil, false
	}
	var node yaml.Node
	if yaml.Unmarshal(item, &node) != nil {
		return nil, false
	}
	return &node, true
}

// flowRoot reports whether an item's node is a flow collection (or may
// be): its first token, past comments, an anchor and a tag, opens one,
// or is something this look does not know.
func flowRoot(item []byte) bool {
	for {
		item = bytes.TrimLeft(item, " \t\r\n")
		switch {
		case len(item) == 0:
			return false
		case item[0] == '#':
			end := bytes.IndexByte(item, '\n')
			if end < 0 {
				return false
			}
			item = item[end:]
		case item[0] == '&' || item[0] == '!':
			end := bytes.IndexAny(item, " \t\r\n")
			if end < 0 {
				return true
			}
			item = item[end:]
		default:
			return item[0] == '{' || item[0] == '[' || item[0] == '*'
		}
	}
}

// indentedUnder reports whether every line of an item's text after the
// one its mapping starts on is indented at least as far as that mapping,
// but for comments: then the item is one YAML document (yaml's reading
// starts a second one at a line indented less than the mapping, where the
// stream's reading would refuse the line).
func indentedUnder(item []byte) bool {
	column := -1
	for len(item) > 0 {
		end := bytes.IndexByte(item, '\n') + 1
		if end == 0 {
			end = len(item)
		}
		line := item[:end]
		item = item[end:]
		if blankOrComment(line) {
			continue
		}
		indent := leadingSpaces(line)
		if column < 0 {
			column = indent
		} else if indent < column {
			return false
		}
	}
	return true
}

// readOneDocument reads text that must hold one YAML document and nothing
// more (yaml's reading may find a second starting without `---` where a
// line is indented less than its mapping).
func readOneDocument(text []byte) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var node, more yaml.Node
	if dec.Decode(&node) != nil || dec.Decode(&more) != io.EOF {
		return nil, false
	}
	return &node, true
}

// printable reports whether text is UTF-8 of characters YAML allows in a
// stream (tab, \n and \r\n, and no other control characters nor line
// breaks, which the cut by lines would not see).
func printable(text []byte) bool {
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f || c == '\r' && (i+1 == len(text) || text[i+1] != '\n') {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(text[i:])
		if r == utf8.RuneError && size == 1 || r >= 0x80 && r <= 0x9f || r == 0x2028 || r == 0x2029 || r >= 0xd800 && r <= 0xdfff || r == 0xfffe || r == 0xffff || r == 0xfeff && i > 0 {
			return false
		}
		i += size
	}
	return true
}

// isItemsKey reports whether a line is `items:` at the first column with
// nothing after it but a comment.
func isItemsKey(s []byte) bool {
	rest, ok := bytes.CutPrefix(s, []byte("items:"))
	if !ok {
		return false
	}
	trimmed := bytes.TrimLeft(rest, " \t")
	if len(trimmed) < len(rest) && len(trimmed) > 0 && trimmed[0] == '#' {
		return true
	}
	return len(bytes.TrimRight(trimmed, "\r\n")) == 0
}

func leadingSpaces(s []byte) int {
	i := 0
	for i < len(s) && s[i] == ' ' {
		i++
	}
	return i
}

func (l *blockList) done() bool { return l.next >= len(l.starts) }

// nextWindow reads the next window of items, on every CPU. An item that
// does not read as a mapping on its own ends the cutting: the items from
// it on come from the whole document read as one tree.
func (l *blockList) nextWindow() []Document {
	from := l.next
	n := min(listWindow, len(l.starts)-from)
	out := make([]Document, n)
	cut := make([]bool, n) // the item did not read on its own
	parallel(n, func(j int) {
		i := from + j
		defer func() {
			if r := recover(); r != nil {
				out[j] = Document{Source: itemSource(l.src, i), Err: fmt.Errorf("reading this document failed: %v", r)}
			}
		}()
		end := l.end
		if l.ends != nil {
			end = l.ends[i]
		} else if i+1 < len(l.starts) {
			end = l.starts[i+1]
		}
		item := bytes.Clone(l.text[l.starts[i]:end])
		if l.indent >= 0 {
			item[l.indent] = ' ' // the dash: the item's mapping stays in its columns
		}
		node, ok := readItem(item)
		if !ok || len(node.Content) != 1 || node.Content[0].Kind != yaml.MappingNode {
			cut[j] = true
			return
		}
		shiftLines(node, l.lines[i]-1)
		out[j] = readObject(node.Content[0], itemSource(l.src, i))
	})
	for j := range n {
		if cut[j] {
			l.next = len(l.starts)
			return append(out[:j], readTree(l.text, l.first, l.name, l.index, from+j)...)
		}
	}
	l.next += n
	return out
}

// readObject turns one YAML node into a Document: a mapping without
// duplicate keys, its values as an unstructured object holds them (JSON
// values: int64 and float64), with the line of every field.
func readObject(n *yaml.Node, src string) Document {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d := strictyaml.Decoder{}
	v, err := d.Convert(n, anyType)
	if err != nil {
		return Document{Source: src, Err: err}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Document{Source: src, Err: fmt.Errorf("line %d: not a mapping", n.Line)}
	}
	if dup := duplicateKey(n, ""); dup != "" {
		return Document{Source: src, Err: fmt.Errorf("duplicate key %s", dup)}
	}
	js, err := jsontree.Marshal(m)
	if err != nil {
		return Document{Source: src, Err: err}
	}
	obj := map[string]any{}
	if err := k8sjson.Unmarshal(js, &obj); err != nil {
		return Document{Source: src, Err: err}
	}
	lines := map[string]int{}
	nodeLines(n, "", lines)
	return Document{Source: src, Object: &unstructured.Unstructured{Object: obj}, Lines: lines}
}

// nodeLines records the line of every field and list item under n, by
// path; a field's line is its key's.
func nodeLines(n *yaml.Node, path string, lines map[string]int) {
	if _, seen := lines[path]; !seen {
		lines[path] = n.Line
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Style&yaml.LiteralStyle != 0 {
			// A literal block (|): its text's line k is line n.Line+k.
			lines[path+LiteralBlock] = n.Line
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := JoinPath(path, n.Content[i].Value)
			lines[p] = n.Content[i].Line
			nodeLines(n.Content[i+1], p, lines)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			nodeLines(item, fmt.Sprintf("%s[%d]", path, i), lines)
		}
	}
}

// LiteralBlock suffixes the path of a string written as a literal block
// scalar in Document.Lines: the line of its | indicator.
const LiteralBlock = "|"

// JoinPath is path.key, or key at the root.
func JoinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// MappingValue is the value node of key in mapping n (nil: none), aliases
// resolved.
func MappingValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}

var anyType = reflect.TypeFor[map[string]any]()

// duplicateKey returns the path of the first key that appears twice in a
// mapping (the API server rejects such documents), or "".
func duplicateKey(n *yaml.Node, path string) string {
	switch n.Kind {
	case yaml.MappingNode:
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			p := JoinPath(path, k)
			if seen[k] {
				return fmt.Sprintf("%s (line %d)", p, n.Content[i].Line)
			}
			seen[k] = true
			if d := duplicateKey(n.Content[i+1], p); d != "" {
				return d
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if d := duplicateKey(c, fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	}
	return ""
}

// duplicateKeyOutside is duplicateKey for a mapping, not looking inside
// the value of key skip (a List's items: each is checked as it is read).
func duplicateKeyOutside(n *yaml.Node, skip string) string {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if seen[k] {
			return fmt.Sprintf("%s (line %d)", k, n.Content[i].Line)
		}
		seen[k] = true
		if k == skip {
			continue
		}
		if d := duplicateKey(n.Content[i+1], k); d != "" {
			return d
		}
	}
	return ""
}
