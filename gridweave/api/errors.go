package api

import (
	"encoding/json"
	"maps"
)

// ErrorBody is the body of every answer other than 2xx.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error says why a request was refused. Details are written beside the
// other fields of the error object, and read back from whatever fields
// it has besides code, message and field.
type Error struct {
	Code    string
	Message string
	Field   string
	Details map[string]any
}

// MarshalJSON writes code, message, field (when set) and the details as
// one object.
func (e Error) MarshalJSON() ([]byte, error) {
	obj := make(map[string]any, 3+len(e.Details))
	maps.Copy(obj, e.Details)
	obj["code"], obj["message"] = e.Code, e.Message
	if e.Field != "" {
		obj["field"] = e.Field
	}
	return json.Marshal(obj)
}

// UnmarshalJSON reads an error object written by MarshalJSON.
func (e *Error) UnmarshalJSON(data []byte) error {
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	*e = Error{}
	e.Code, _ = obj["code"].(string)
	e.Message, _ = obj["message"].(string)
	e.Field, _ = obj["field"].(string)
	delete(obj, "code")
	delete(obj, "message")
	delete(obj, "field")
	if len(obj) > 0 {
		e.Details = obj
	}
	return nil
}
