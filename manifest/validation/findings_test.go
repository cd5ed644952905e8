package validation

import (
	"strings"
	"testing"
)

// TestSortFindingsInReadingOrder: findings come in the order their
// documents and List items were read, numbers read as numbers.
func TestSortFindingsInReadingOrder(t *testing.T) {
	fs := []Finding{{Source: "a.yaml#10"}, {Source: "a.yaml#1.items[10]"}, {Source: "a.yaml#2"}, {Source: "a.yaml#1.items[9]"}, {Source: "a.yaml#1"}}
	SortFindings(fs)
	want := "a.yaml#1 a.yaml#1.items[9] a.yaml#1.items[10] a.yaml#2 a.yaml#10"
	var got []string
	for _, f := range fs {
		got = append(got, f.Source)
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("sorted %v, want %s", got, want)
	}
}
