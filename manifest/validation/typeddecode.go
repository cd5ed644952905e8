package validation

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// fromUnstructured decodes a JSON-shaped object into a Go type the way
// runtime.DefaultUnstructuredConverter.FromUnstructured does, but driven
// by the keys the object has rather than by every field the type has —
// a pod spec has some forty fields and a user sets five. Anything it does
// not mirror exactly (a conversion the library may refuse, an unusual
// value for a type with its own JSON decoding) makes it hand the whole
// object to the library, so results and errors are the library's.
// TestFromUnstructuredMatchesLibrary holds it to that.
func fromUnstructured(obj map[string]any, out any) error {
	dv := reflect.ValueOf(out).Elem()
	err := decodeValue(obj, dv)
	if err == nil || errors.Is(err, errRefused) {
		return err
	}
	dv.Set(reflect.Zero(dv.Type()))
	return runtime.DefaultUnstructuredConverter.FromUnstructured(obj, out)
}

var (
	// errNotMirrored sends a value to the library.
	errNotMirrored = errors.New("not mirrored")
	// errRefused: a value of a JSON type the library converts to the
	// field's under no circumstances (a string into an integer, say —
	// the commonest mistake), where it would refuse the whole object: no
	// need to ask it (its field caches cost a first RayCluster some
	// milliseconds).
	errRefused = errors.New("a value of a JSON type the field's Go type does not take")
)

// structFields is a struct type's JSON names, with inlined structs'
// fields flattened in (a name may fill several fields, as in the library).
type structFields map[string][][]int

var fieldTables sync.Map // reflect.Type → structFields

func fieldsOf(t reflect.Type) structFields {
	if f, ok := fieldTables.Load(t); ok {
		return f.(structFields)
	}
	out := structFields{}
	var add func(t reflect.Type, index []int)
	add = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue // no JSON key fills it
			}
			idx := append(append([]int(nil), index...), i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" && f.Anonymous {
				if f.Type.Kind() == reflect.Struct {
					add(f.Type, idx)
					continue
				}
				out["\x00inline"] = nil // an inlined non-struct: not mirrored
				continue
			}
			if name == "" {
				name = f.Name
			}
			out[name] = append(out[name], idx)
		}
	}
	add(t, nil)
	fieldTables.Store(t, out)
	return out
}

var (
	quantityType    = reflect.TypeFor[resource.Quantity]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
)

func decodeValue(x any, dv reflect.Value) error {
	if x == nil {
		dv.Set(reflect.Zero(dv.Type()))
		return nil
	}
	dt := dv.Type()
	switch dt {
	case quantityType:
		return decodeQuantity(x, dv)
	case intOrStringType:
		return decodeIntOrString(x, dv)
	}
	switch dt.Kind() {
	case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Struct, reflect.Interface:
	default:
		return decodeScalar(x, dv)
	}
	if entry := value.TypeReflectEntryOf(dt); entry.CanConvertFromUnstructured() {
		return entry.FromUnstructured(reflect.ValueOf(x), dv) // the library's own path
	}
	switch dt.Kind() {
	case reflect.Struct:
		m, ok := x.(map[string]any)
		if !ok {
			return errNotMirrored
		}
		fields := fieldsOf(dt)
		if _, inline := fields["\x00inline"]; inline {
			return errNotMirrored
		}
		for k, v := range m {
			for _, idx := range fields[k] {
				if err := decodeValue(v, dv.FieldByIndex(idx)); err != nil {
					return err
				}
			}
		}
		return nil
	case reflect.Map:
		m, ok := x.(map[string]any)
		if !ok || dt.Key().Kind() != reflect.String {
			return errNotMirrored
		}
		out := reflect.MakeMapWithSize(dt, len(m))
		key, elem := reflect.New(dt.Key()).Elem(), reflect.New(dt.Elem()).Elem()
		for k, v := range m {
			elem.SetZero()
			if err := decodeValue(v, elem); err != nil {
				return err
			}
			key.SetString(k)
			out.SetMapIndex(key, elem)
		}
		dv.Set(out)
		return nil
	case reflect.Slice:
		a, ok := x.([]any)
		if !ok {
			return errNotMirrored // includes []byte from a base64 string
		}
		out := reflect.MakeSlice(dt, len(a), len(a))
		for i, v := range a {
			if err := decodeValue(v, out.Index(i)); err != nil {
				return err
			}
		}
		dv.Set(out)
		return nil
	case reflect.Pointer:
		p := reflect.New(dt.Elem())
		if err := decodeValue(x, p.Elem()); err != nil {
			return err
		}
		dv.Set(p)
		return nil
	case reflect.Interface:
		v := reflect.ValueOf(x)
		if !v.Type().AssignableTo(dt) {
			return errNotMirrored
		}
		dv.Set(v)
		return nil
	}
	return errNotMirrored
}

// decodeScalar allows what the library allows without surprises: a JSON
// string into a string kind, a bool into a bool, an integer into an
// integer that holds it, a number into a float.
func decodeScalar(x any, dv reflect.Value) error {
	switch x := x.(type) {
	case string:
		if dv.Kind() == reflect.String {
			dv.SetString(x)
			return nil
		}
	case bool:
		if dv.Kind() == reflect.Bool {
			dv.SetBool(x)
			return nil
		}
	case int64:
		switch dv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if !dv.OverflowInt(x) {
				dv.SetInt(x)
				return nil
			}
		case reflect.Float32, reflect.Float64:
			dv.SetFloat(float64(x))
			return nil
		}
	case float64:
		switch dv.Kind() {
		case reflect.Float64:
			dv.SetFloat(x)
			return nil
		}
	}
	if refusedScalar(x, dv.Type()) {
		return errRefused
	}
	return errNotMirrored
}

// refusedScalar reports whether the library's converter refuses x for a
// field of simple type dt: it converts a string only into a string kind,
// a bool only into a bool, and anything else only through the type's own
// JSON decoding, if it has one; an integer into a string kind it refuses
// before looking for one.
func refusedScalar(x any, dt reflect.Type) bool {
	switch x.(type) {
	case string:
		if dt.Kind() == reflect.String {
			return false
		}
	case bool:
		if dt.Kind() == reflect.Bool {
			return false
		}
	case int64:
		switch dt.Kind() {
		case reflect.String:
			return true
		case reflect.Bool:
		default:
			return false
		}
	default:
		return false
	}
	return !value.TypeReflectEntryOf(dt).CanConvertFromUnstructured()
}

// decodeQuantity parses what Quantity.UnmarshalJSON would, for the values
// whose JSON form is plain (no escapes); others go to the library.
func decodeQuantity(x any, dv reflect.Value) error {
	var text string
	switch x := x.(type) {
	case string:
		for _, r := range x {
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '+' || r == '-' || r == ' ') {
				return errNotMirrored
			}
		}
		text = x
	case int64:
		text = strconv.FormatInt(x, 10)
	default:
		return errNotMirrored
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(text))
	if err != nil {
		return errNotMirrored // the library words the error
	}
	dv.Set(reflect.ValueOf(q))
	return nil
}

// decodeIntOrString mirrors IntOrString.UnmarshalJSON for strings and
// int32 integers.
func decodeIntOrString(x any, dv reflect.Value) error {
	switch x := x.(type) {
	case string:
		dv.Set(reflect.ValueOf(intstr.FromString(x)))
		return nil
	case int64:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			dv.Set(reflect.ValueOf(intstr.FromInt32(int32(x))))
			return nil
		}
	}
	return errNotMirrored
}
