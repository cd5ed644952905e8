package jsontree

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// buffers hold the output while it is written, so that Marshal allocates
// only its result, of the size it turned out to be.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuffer is the largest buffer put back: one huge object does
// not keep its buffer alive for the small ones after it.
const maxPooledBuffer = 1 << 20

// Marshal returns the JSON of v, as encoding/json.Marshal does.
func Marshal(v any) ([]byte, error) {
	buf := buffers.Get().(*[]byte)
	out, err := appendValue((*buf)[:0], v, 0)
	var result []byte
	if err == nil {
		result = slices.Clone(out)
	}
	if cap(out) <= maxPooledBuffer {
		*buf = out
		buffers.Put(buf)
	}
	return result, err
}

// Append appends the JSON of v to dst and returns the extended buffer. On
// an error (a value encoding/json refuses, such as NaN) the returned
// buffer is dst.
func Append(dst []byte, v any) ([]byte, error) {
	out, err := appendValue(dst, v, 0)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// cycleDepth is the nesting past which a subtree is handed to
// encoding/json, which from that depth on tells a tree that contains
// itself from a deep one, and refuses the first as it always has.
const cycleDepth = 1000

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > cycleDepth {
		return appendByEncodingJSON(dst, v)
	}
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case float64:
		return appendFloat64(dst, v)
	case map[string]any:
		return appendMap(dst, v, depth)
	case []any:
		return appendSlice(dst, v, depth)
	default:
		return appendByEncodingJSON(dst, v)
	}
}

func appendByEncodingJSON(dst []byte, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, data...), nil
}

func appendMap(dst []byte, m map[string]any, depth int) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	var onStack [16]string // the keys of most objects' maps: no allocation
	keys := onStack[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = appendValue(dst, m[k], depth+1); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

func appendSlice(dst []byte, s []any, depth int) ([]byte, error) {
	if s == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i, e := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendValue(dst, e, depth+1); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// appendFloat64 writes f as encoding/json does: the shortest decimal that
// reads back as f, in exponent form only for magnitudes below 1e-6 or from
// 1e21 on, with a one-digit exponent not padded to two.
func appendFloat64(dst []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return appendByEncodingJSON(dst, f) // encoding/json's own UnsupportedValueError
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// strconv writes e-07; encoding/json writes e-7.
		if n := len(dst) - start; n >= 4 && dst[len(dst)-4] == 'e' && dst[len(dst)-3] == '-' && dst[len(dst)-2] == '0' {
			dst[len(dst)-2] = dst[len(dst)-1]
			dst = dst[:len(dst)-1]
		}
	}
	return dst, nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s quoted as encoding/json does with its default
// HTML escaping: <, > and & as \u escapes, control characters escaped,
// invalid UTF-8 as U+FFFD, and U+2028 and U+2029 escaped for JavaScript.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	written := 0 // s[:written] is in dst
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[written:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			written = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[written:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[written:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		written = i
	}
	dst = append(dst, s[written:]...)
	return append(dst, '"')
}
