package jsontree

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// matchesEncodingJSON fails the test unless Marshal writes v as
// encoding/json.Marshal does, or both refuse it with the same error.
func matchesEncodingJSON(t *testing.T, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := Marshal(v)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("%#v: error %v, encoding/json's %v", v, err, wantErr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("%#v:\n got %s\nwant %s", v, got, want)
	}
	appended, err := Append([]byte("prefix"), v)
	if err == nil && string(appended) != "prefix"+string(want) {
		t.Fatalf("%#v: Append wrote %s after its prefix, want %s", v, appended, want)
	}
}

func TestMarshalMatchesEncodingJSON(t *testing.T) {
	type other struct {
		A int `json:"a"`
	}
	selfMap := map[string]any{"name": "loop"}
	selfMap["self"] = selfMap
	selfSlice := []any{"loop", nil}
	selfSlice[1] = selfSlice
	deep := any("bottom") // deeper than encoding/json's cycle check, no cycle
	for i := range 1500 {
		if i%2 == 0 {
			deep = map[string]any{"in": deep}
		} else {
			deep = []any{deep}
		}
	}
	values := []any{
		nil, true, false, "", "plain", int64(-42), 7, int32(3), uint8(9),
		int64(math.MaxInt64), int64(math.MinInt64), int64(1<<53 + 1), math.MaxInt, math.MinInt,
		int32(math.MaxInt32), int32(math.MinInt32), uint64(math.MaxUint64),
		0.0, math.Copysign(0, -1), 1.0, -2.5, 1e20, 1e21, 123456789e15, 1e-6, 9.99e-7, 5e-324, 1e-100, 1e100,
		math.MaxFloat64, -1e-10, 1.5e300, float32(0.1), float32(1e-7),
		"quote\" backslash\\ slash/ <tag> & amp", "\b\f\n\r\t\x00\x01\x1f\x7f",
		"é ü 中文 🎉", "\xff bad \xc3 utf8 \xed\xa0\x80", "line\u2028para\u2029end",
		map[string]any(nil), []any(nil), map[string]any{}, []any{},
		map[string]any{"b": 1, "a": []any{"x", nil, map[string]any{"z": 1.5, "<": ">"}}, "": "empty key", "\xff": "bad key"},
		map[string]any{"nilMap": map[string]any(nil), "nilSlice": []any(nil), "list": []any{map[string]any(nil), []any(nil)}},
		map[string]any{"a key longer than sixteen bytes, and some": 1, "k01": 1, "k02": 2, "k03": 3, "k04": 4, "k05": 5,
			"k06": 6, "k07": 7, "k08": 8, "k09": 9, "k10": 10, "k11": 11, "k12": 12, "k13": 13, "k14": 14, "k15": 15, "k16": 16, "k17": 17},
		[]any{map[string]any{"k": other{A: 1}}, []string{"typed"}, map[string]string{"typed": "map"}, []map[string]any{{"x": 1}}},
		[]any{json.Number("12.50"), json.Number("not a number"), time.Date(2026, 12, 2, 1, 2, 3, 4, time.UTC)},
		map[string]any{"nan": math.NaN()}, []any{1, math.Inf(1)}, math.Inf(-1),
		map[string]any{"ch": make(chan int)},
		selfMap, selfSlice, deep,
	}
	for _, v := range values {
		matchesEncodingJSON(t, v)
	}
	// Generated trees, as the fuzz target builds them, from a fixed seed.
	random := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 256)
	for range 50000 {
		for i := range data {
			data[i] = byte(random.Uint32())
		}
		matchesEncodingJSON(t, (&treeFrom{data: data}).value(0))
	}
}

func TestAppendKeepsDstOnError(t *testing.T) {
	dst := []byte("prefix")
	out, err := Append(dst, map[string]any{"a": "ok", "b": math.NaN()})
	if err == nil || string(out) != "prefix" {
		t.Fatalf("Append = %q, %v; want the prefix alone and an error", out, err)
	}
}

// Marshal's result is its own: the pooled buffer it was written in is
// reused by the next call.
func TestMarshalResultsDoNotShareMemory(t *testing.T) {
	first, err := Marshal(map[string]any{"first": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Marshal(map[string]any{"second": 2}); err != nil {
		t.Fatal(err)
	}
	if string(first) != `{"first":1}` {
		t.Fatalf("the first result became %s", first)
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

func (f *treeFrom) uint64() uint64 {
	var b [8]byte
	for i := range b {
		b[i] = f.byte()
	}
	return binary.LittleEndian.Uint64(b[:])
}

func (f *treeFrom) string() string {
	n := min(int(f.byte()%32), len(f.data))
	s := string(f.data[:n])
	f.data = f.data[n:]
	return s
}

func (f *treeFrom) value(depth int) any {
	kind := f.byte() % 16
	if depth > 4 && kind >= 12 {
		kind %= 12
	}
	switch kind {
	case 0:
		return nil
	case 1:
		return f.byte()%2 == 0
	case 2, 3:
		return f.string()
	case 4:
		return int64(f.uint64())
	case 5:
		return int(f.uint64())
	case 6:
		return int32(f.uint64())
	case 7:
		return math.Float64frombits(f.uint64())
	case 8:
		return float64(int8(f.byte())) / float64(1+f.byte())
	case 9:
		return float64(int64(f.uint64())) * math.Pow(10, float64(int8(f.byte())%40))
	case 10:
		switch f.byte() % 4 {
		case 0:
			return map[string]any(nil)
		case 1:
			return []any(nil)
		case 2:
			return json.Number(f.string())
		default:
			return map[string]string{f.string(): f.string()}
		}
	case 11:
		return uint64(f.uint64())
	case 12, 13:
		m := map[string]any{}
		for range f.byte() % 20 {
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
	f.Add([]byte{12, 3, 2, 1, 'a', 2, 5, '<', 0xff, 'x', '&', '\n'})
	f.Add([]byte{14, 4, 4, 1, 0, 0, 0, 0, 0, 0x20, 0x7f, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 6, 0, 0, 0, 0x80, 0, 0, 0, 0})
	f.Add([]byte{13, 3, 3, 3, 0xe2, 0x80, 0xa8, 8, 200, 3, 2, 0x8d, 0xed, 0xb5, 0xa0, 0xf7, 0xc6, 0xb0, 0x3e, 10, 2, 3, '1', 'e', '9'})
	f.Fuzz(func(t *testing.T, data []byte) {
		matchesEncodingJSON(t, (&treeFrom{data: data}).value(0))
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
