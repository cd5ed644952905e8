package gridweave

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	sigsjson "sigs.k8s.io/json"

	"gridweave.dev/gridweave/api"
)

// decodeJSON reads r's body into v strictly: exact (case-sensitive) field
// names, no unknown or duplicate field, no trailing data, values of the
// right type. Every refusal is a 400 naming the field (a 413 past the
// body limit, which the middleware enforces).
func decodeJSON(r *http.Request, v any) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeStrict(data, v)
}

// readBody reads a JSON request body: 415 for a missing or other content
// type (a PATCH may also send application/merge-patch+json), 413 past the
// limit, 400 when empty.
func readBody(r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" && !(r.Method == http.MethodPatch && mt == "application/merge-patch+json") {
		return nil, &apiError{code: api.CodeUnsupportedMediaType, field: "Content-Type",
			message: "send the body as application/json (Content-Type: application/json), e.g. curl --json"}
	}
	data, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, bodyTooLarge(tooBig.Limit)
	}
	if err != nil {
		return nil, &apiError{code: api.CodeInvalidBody, message: "could not read the request body: " + err.Error()}
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, &apiError{code: api.CodeInvalidBody, message: "the request body is empty; send a JSON object"}
	}
	if trimmed[0] != '{' {
		return nil, &apiError{code: api.CodeInvalidBody, message: "the body must be a JSON object"}
	}
	return data, nil
}

// decodeStrict is decodeJSON's decoding of a body already read.
func decodeStrict(data []byte, v any) error {
	strict, err := sigsjson.UnmarshalStrict(data, v)
	if err != nil {
		return jsonError(err)
	}
	if len(strict) > 0 {
		var fe sigsjson.FieldError
		if errors.As(strict[0], &fe) {
			return badField(fe.FieldPath(), "%s", strict[0].Error())
		}
		return &apiError{code: api.CodeInvalidBody, message: strict[0].Error()}
	}
	return nil
}

func jsonError(err error) *apiError {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			return &apiError{code: api.CodeInvalidBody, message: fmt.Sprintf("the body must be a JSON object, not %s", typeErr.Value)}
		}
		return badField(field, "%s must be of type %s, got %s", field, jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	}
	if ok, offset := sigsjson.SyntaxErrorOffset(err); ok {
		return &apiError{code: api.CodeInvalidJSON, message: fmt.Sprintf("the body is not valid JSON (at byte %d): %v", offset, err)}
	}
	return &apiError{code: api.CodeInvalidJSON, message: "the body is not valid JSON: " + err.Error()}
}

func jsonTypeName(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "integer"
	case strings.HasPrefix(kind, "float"):
		return "number"
	case kind == "map", kind == "struct":
		return "object"
	case kind == "slice", kind == "array":
		return "array"
	case kind == "bool":
		return "boolean"
	}
	return kind
}

func bodyTooLarge(limit int64) *apiError {
	return &apiError{code: api.CodeBodyTooLarge, message: fmt.Sprintf("the request body is larger than %d bytes", limit)}
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
