package yamlstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// cutJSONList returns a document written as one JSON object whose kind
// names a list cut into its items (each a JSON object, read by yaml on
// its own, as the block List's items are), or nil when it is anything
// else: not JSON, a kind of its own, items that are not objects. Its
// other keys are checked as the whole document's reading would, on the
// text with the items blanked out (line breaks kept, so lines stay).
func cutJSONList(text []byte, first int, name string, index *int) *blockList {
	start := bytes.TrimLeft(text, " \t\r\n")
	if len(start) == 0 || start[0] != '{' || !printable(text) {
		return nil
	}
	l := &blockList{text: text, first: first, name: name, index: index, src: fmt.Sprintf("%s#%d", name, *index), indent: -1}
	dec := json.NewDecoder(bytes.NewReader(text))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	itemsStart, itemsEnd := -1, -1
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key != "items" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if itemsStart >= 0 {
			return nil // twice: the whole document's reading says so
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return nil
		}
		itemsStart = int(dec.InputOffset())
		for dec.More() {
			var item json.RawMessage
			if dec.Decode(&item) != nil {
				return nil
			}
			end := int(dec.InputOffset())
			begin := end - len(item)
			if item[0] != '{' {
				return nil
			}
			l.starts = append(l.starts, begin)
			l.ends = append(l.ends, end)
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
			return nil
		}
		itemsEnd = int(dec.InputOffset()) - 1
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') || itemsStart < 0 {
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil
	}
	// The items' lines, counted as the text is walked once.
	line, at := first, 0
	for _, s := range l.starts {
		line += bytes.Count(text[at:s], []byte("\n"))
		at = s
		l.lines = append(l.lines, line)
	}
	// The rest of the document, its items blanked out.
	header := bytes.Clone(text)
	for i := itemsStart; i < itemsEnd; i++ {
		if header[i] != '\n' {
			header[i] = ' '
		}
	}
	node, ok := readOneDocument(header)
	if !ok || len(node.Content) != 1 || node.Content[0].Kind != yaml.MappingNode || !listKind(node.Content[0]) || duplicateKey(node.Content[0], "") != "" {
		return nil
	}
	l.end = itemsEnd
	return l
}
