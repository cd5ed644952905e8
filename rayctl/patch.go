package rayctl

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// clusterPatch returns the JSON patch (RFC 6902) that turns before into
// after, or nil if they do not differ. Its first operation sets
// metadata.resourceVersion to before's, which makes the API server refuse
// the patch with 409 Conflict unless the object is still the one that was
// read, and makes every path in the patch safe to address by position.
// (Fake clientsets keep no resourceVersion; there the operation is left
// out.) The status is never patched: it is a subresource.
//
// The patch names only what changed, so fields that the server holds and
// the Go types do not know survive: those of the object, of untouched
// worker groups, containers and other named list items, and of every
// object the change only edited. Lists of objects keyed by "groupName" or
// "name" are patched item by item (removed, moved, added, edited in
// place); other lists are edited in place when their length stays the
// same and replaced whole when it changes.
func clusterPatch(before, after *rayv1.RayCluster) ([]byte, error) {
	b, err := jsonTree(before)
	if err != nil {
		return nil, err
	}
	a, err := jsonTree(after)
	if err != nil {
		return nil, err
	}
	for _, doc := range []map[string]any{b, a} {
		delete(doc, "status")
		if m, ok := doc["metadata"].(map[string]any); ok {
			delete(m, "resourceVersion")
		}
	}
	var d patchDiff
	d.objects("", b, a)
	if len(d.ops) == 0 {
		return nil, nil
	}
	if before.ResourceVersion != "" {
		d.ops = slices.Insert(d.ops, 0, patchOp{"op": "replace", "path": "/metadata/resourceVersion", "value": before.ResourceVersion})
	}
	return json.Marshal(d.ops)
}

// jsonTree is v as generic JSON, numbers kept as written.
func jsonTree(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree map[string]any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	return tree, nil
}

type patchOp map[string]any

// patchDiff collects the operations that turn one JSON tree into another.
//
// before is the Go types' view of what the server holds: equal to it in
// every known field, but where the server omits a member the Go types may
// show null or an empty value. So a null member counts as absent, a member
// is set with "add" (which creates or replaces it), and an object is only
// entered, to edit its members one by one, when before shows it holding
// something — then the server surely has it; otherwise it is set whole.
type patchDiff struct {
	ops []patchOp
}

func (d *patchDiff) add(op, path string, value any) {
	d.ops = append(d.ops, patchOp{"op": op, "path": path, "value": withoutNulls(value)})
}

func (d *patchDiff) objects(path string, before, after map[string]any) {
	keys := make([]string, 0, len(before)+len(after))
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		b, a := before[k], after[k]
		p := path + "/" + escapePointer(k)
		switch {
		case a == nil && b == nil:
		case a == nil:
			d.ops = append(d.ops, patchOp{"op": "remove", "path": p})
		case b == nil:
			d.add("add", p, a)
		default:
			d.values(p, "add", b, a)
		}
	}
}

// values diffs two present values at path; set is the operation that
// overwrites the value there ("add" for an object member, "replace" for a
// list item).
func (d *patchDiff) values(path, set string, before, after any) {
	if reflect.DeepEqual(before, after) {
		return
	}
	switch b := before.(type) {
	case map[string]any:
		if a, ok := after.(map[string]any); ok && holdsSomething(b) {
			d.objects(path, b, a)
			return
		}
	case []any:
		if a, ok := after.([]any); ok && len(b) > 0 {
			d.lists(path, set, b, a)
			return
		}
	}
	d.add(set, path, after)
}

func (d *patchDiff) lists(path, set string, before, after []any) {
	if key := listKey(before, after); key != "" {
		d.keyedLists(path, key, before, after)
		return
	}
	if len(before) != len(after) {
		d.add(set, path, after)
		return
	}
	for i := range before {
		d.values(path+"/"+strconv.Itoa(i), "replace", before[i], after[i])
	}
}

// keyedLists edits a list of objects identified by key: items that are
// gone are removed, kept items are moved into their new place and edited
// there, new items are inserted.
func (d *patchDiff) keyedLists(path, key string, before, after []any) {
	beforeByKey := map[string]any{}
	current := make([]string, len(before)) // the keys in the list as the operations so far leave it
	for i, item := range before {
		k := item.(map[string]any)[key].(string)
		beforeByKey[k] = item
		current[i] = k
	}
	kept := map[string]bool{}
	for _, item := range after {
		kept[item.(map[string]any)[key].(string)] = true
	}
	for i := len(before) - 1; i >= 0; i-- {
		if !kept[current[i]] {
			d.ops = append(d.ops, patchOp{"op": "remove", "path": path + "/" + strconv.Itoa(i)})
			current = slices.Delete(current, i, i+1)
		}
	}
	for j, item := range after {
		k := item.(map[string]any)[key].(string)
		at := path + "/" + strconv.Itoa(j)
		b, ok := beforeByKey[k]
		if !ok {
			d.add("add", at, item)
			current = slices.Insert(current, j, k)
			continue
		}
		if from := slices.Index(current, k); from != j {
			d.ops = append(d.ops, patchOp{"op": "move", "from": path + "/" + strconv.Itoa(from), "path": at})
			current = slices.Insert(slices.Delete(current, from, from+1), j, k)
		}
		d.values(at, "replace", b, item)
	}
}

// listKey returns the member that identifies the items of both lists —
// "groupName" or "name", a non-empty string unique within each list — or
// "" if there is none.
func listKey(lists ...[]any) string {
	for _, key := range []string{"groupName", "name"} {
		if identifiedBy(key, lists...) {
			return key
		}
	}
	return ""
}

func identifiedBy(key string, lists ...[]any) bool {
	for _, list := range lists {
		seen := map[string]bool{}
		for _, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				return false
			}
			k, ok := m[key].(string)
			if !ok || k == "" || seen[k] {
				return false
			}
			seen[k] = true
		}
	}
	return true
}

// holdsSomething reports whether v has a value other than null, false,
// zero, "" or an empty list anywhere in it: only then can the server be
// relied on to hold the object v was decoded from, rather than the Go
// types having made it up.
func holdsSomething(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		f, err := v.Float64()
		return err != nil || f != 0
	case []any:
		return len(v) > 0
	case map[string]any:
		for _, m := range v {
			if holdsSomething(m) {
				return true
			}
		}
		return false
	}
	return true
}

// withoutNulls drops the null members of objects in v (the server drops
// them anyway).
func withoutNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, m := range v {
			if m != nil {
				out[k] = withoutNulls(m)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, m := range v {
			out[i] = withoutNulls(m)
		}
		return out
	}
	return v
}

// escapePointer escapes one JSON pointer (RFC 6901) token.
func escapePointer(token string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(token)
}
