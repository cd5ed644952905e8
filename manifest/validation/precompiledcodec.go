package validation

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"encoding/json"

	k8sjson "k8s.io/apimachinery/pkg/util/json"
)

// recordWriter and recordReader are the precompiled form's codec
// (precompiled.go): varints, length-prefixed strings and lists, and 0 for
// an absent list or value.
type recordWriter struct {
	buf []byte
	err error
}

func (w *recordWriter) uint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }

func (w *recordWriter) bool(b bool) {
	if b {
		w.uint(1)
	} else {
		w.uint(0)
	}
}

func (w *recordWriter) string(s string) {
	w.uint(uint64(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *recordWriter) strings(ss []string) {
	if ss == nil {
		w.uint(0)
		return
	}
	w.uint(uint64(len(ss)) + 1)
	for _, s := range ss {
		w.string(s)
	}
}

func (w *recordWriter) refs(refs []uint64) {
	if refs == nil {
		w.uint(0)
		return
	}
	w.uint(uint64(len(refs)) + 1)
	for _, ref := range refs {
		w.uint(ref)
	}
}

func (w *recordWriter) optionalInt(v *int64) {
	if v == nil {
		w.uint(0)
		return
	}
	w.uint(1)
	w.buf = binary.AppendVarint(w.buf, *v)
}

func (w *recordWriter) optionalFloat(v *float64) {
	if v == nil {
		w.uint(0)
		return
	}
	w.uint(1)
	w.uint(math.Float64bits(*v))
}

// json writes a JSON value (nil: none); it is read back the way the API
// server's libraries read JSON: integers as int64, other numbers float64.
func (w *recordWriter) json(v any) {
	if v == nil {
		w.uint(0)
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		w.err = fmt.Errorf("a schema value is not JSON: %w", err)
		return
	}
	w.uint(uint64(len(data)) + 1)
	w.buf = append(w.buf, data...)
}

type recordReader struct {
	buf []byte
	err error
}

func (r *recordReader) fail(what string) {
	if r.err == nil {
		r.err = errors.New(what)
	}
	r.buf = nil
}

func (r *recordReader) uint() uint64 {
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.fail("truncated")
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// count reads a table's or list's length, bounded by the bytes left.
func (r *recordReader) count() uint64 {
	n := r.uint()
	if n > uint64(len(r.buf)) {
		r.fail("a count beyond the data")
		return 0
	}
	return n
}

func (r *recordReader) bool() bool {
	switch r.uint() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("a flag that is neither 0 nor 1")
	return false
}

func (r *recordReader) bytes(n uint64) []byte {
	if n > uint64(len(r.buf)) {
		r.fail("truncated")
		return nil
	}
	b := r.buf[:n:n]
	r.buf = r.buf[n:]
	return b
}

func (r *recordReader) string() string { return string(r.bytes(r.count())) }

func (r *recordReader) strings() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]string, n-1)
	for i := range out {
		out[i] = r.string()
	}
	return out
}

// ref reads a reference into table (the nodes decoded so far).
func ref[T any](r *recordReader, table []*T) *T {
	i := r.uint()
	if i == 0 {
		return nil
	}
	if i > uint64(len(table)) {
		r.fail("a reference to a node not yet decoded")
		return nil
	}
	return table[i-1]
}

func refsTo[T any](r *recordReader, table []*T) []*T {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]*T, n-1)
	for i := range out {
		out[i] = ref(r, table)
	}
	return out
}

func (r *recordReader) optionalInt() *int64 {
	if r.uint() == 0 {
		return nil
	}
	v, n := binary.Varint(r.buf)
	if n <= 0 {
		r.fail("truncated")
		return nil
	}
	r.buf = r.buf[n:]
	return &v
}

func (r *recordReader) optionalFloat() *float64 {
	if r.uint() == 0 {
		return nil
	}
	v := math.Float64frombits(r.uint())
	return &v
}

func (r *recordReader) json() any {
	n := r.count()
	if n == 0 {
		return nil
	}
	var v any
	if err := k8sjson.Unmarshal(r.bytes(n-1), &v); err != nil {
		r.fail(err.Error())
		return nil
	}
	return v
}
