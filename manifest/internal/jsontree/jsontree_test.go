package jsontree

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"
)

// matchesEncodingJSON fails the test unless Marshal writes v as
// encoding/json.Marshal does, or both refuse it.
func matchesEncodingJSON(t *testing.T, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := Marshal(v)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%#v: error %v, encoding/json's %v", v, err, wantErr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("%#v:\n got %s\nwant %s", v, got, want)
	}
}

func TestMarshalMatchesEncodingJSON(t *testing.T) {
	type other struct {
		A int `json:"a"`
	}
	values := []any{
		nil, true, false, "", "plain", int64(-42), 7, int32(3), uint8(9),
		0.0, math.Copysign(0, -1), 1.0, -2.5, 1e20, 1e21, 123456789e15, 1e-6, 9.99e-7, 5e-324,
		math.MaxFloat64, -1e-10, 1.5e300, float32(0.1), float32(1e-7),
		"quote\" backslash\\ slash/ <tag> & amp", "\b\f\n\r\t\x00\x01\x1f\x7f",
		"é ü 中文 🎉", "\xff bad \xc3 utf8 \xed\xa0\x80", "line\u2028para\u2029end",
		map[string]any(nil), []any(nil), map[string]any{}, []any{},
		map[string]any{"b": 1, "a": []any{"x", nil, map[string]any{"z": 1.5, "<": ">"}}, "": "empty key", "\xff": "bad key"},
		[]any{map[string]any{"k": other{A: 1}}, []string{"typed"}, map[string]string{"typed": "map"}},
		map[string]any{"nan": math.NaN()}, []any{1, math.Inf(1)}, math.Inf(-1),
		map[string]any{"ch": make(chan int)},
	}
	for _, v := range values {
		matchesEncodingJSON(t, v)
	}
}

func TestAppendKeepsDstOnError(t *testing.T) {
	dst := []byte("prefix")
	out, err := Append(dst, map[string]any{"a": "ok", "b": math.NaN()})
	if err == nil || string(out) != "prefix" {
		t.Fatalf("Append = %q, %v; want the prefix alone and an error", out, err)
	}
}

// treeFrom builds a tree of generic values from fuzz input: each byte
// chooses the next value's kind, the bytes after it its contents.
type treeFrom struct{ data []byte }

func (f *treeFrom) byte() byte {
	if len(f.data) == 0 {
		return 0
	}
	b := f.data[0]
	f.data = f.data[1:]
	return b
}

func (f *treeFrom) string() string {
	n := int(f.byte() % 16)
	n = min(n, len(f.data))
	s := string(f.data[:n])
	f.data = f.data[n:]
	return s
}

func (f *treeFrom) value(depth int) any {
	kind := f.byte() % 10
	if depth > 4 && kind >= 7 {
		kind %= 7
	}
	switch kind {
	case 0:
		return nil
	case 1:
		return f.byte()%2 == 0
	case 2:
		return f.string()
	case 3:
		var b [8]byte
		for i := range b {
			b[i] = f.byte()
		}
		return int64(binary.LittleEndian.Uint64(b[:]))
	case 4:
		var b [8]byte
		for i := range b {
			b[i] = f.byte()
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
	case 5:
		return float64(int8(f.byte())) / float64(1+f.byte())
	case 6:
		return int(int8(f.byte()))
	case 7, 8:
		m := map[string]any{}
		for range f.byte() % 6 {
			m[f.string()] = f.value(depth + 1)
		}
		return m
	default:
		s := []any{}
		for range f.byte() % 6 {
			s = append(s, f.value(depth+1))
		}
		return s
	}
}

func FuzzMarshalMatchesEncodingJSON(f *testing.F) {
	f.Add([]byte{7, 3, 1, 'a', 2, 5, '<', 0xff, 'x', '&', '\n'})
	f.Add([]byte{9, 4, 4, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f, 3, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{8, 2, 3, 0xe2, 0x80, 0xa8, 5, 200, 3, 4, 0x8d, 0xed, 0xb5, 0xa0, 0xf7, 0xc6, 0xb0, 0x3e})
	f.Fuzz(func(t *testing.T, data []byte) {
		tree := (&treeFrom{data: data}).value(0)
		matchesEncodingJSON(t, tree)
	})
}

// BenchmarkMarshal writes a pod-like object as this package and as
// encoding/json do.
func BenchmarkMarshal(b *testing.B) {
	container := func(name string) any {
		return map[string]any{
			"name": name, "image": "rayproject/ray:2.46.0",
			"resources": map[string]any{"limits": map[string]any{"cpu": "1", "memory": "2Gi"}, "requests": map[string]any{"cpu": "1", "memory": "2Gi"}},
			"ports":     []any{map[string]any{"containerPort": int64(6379), "name": "gcs"}, map[string]any{"containerPort": int64(8265), "name": "dashboard"}},
			"env":       []any{map[string]any{"name": "RAY_USAGE_STATS_ENABLED", "value": "0"}},
		}
	}
	obj := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "head", "labels": map[string]any{"ray.io/node-type": "head", "app": "ray"}},
		"spec":     map[string]any{"containers": []any{container("ray-head"), container("sidecar")}, "restartPolicy": "Always"},
	}
	b.Run("jsontree", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Marshal(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
}
