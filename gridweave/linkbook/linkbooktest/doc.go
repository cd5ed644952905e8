// Package linkbooktest is the suite every linkbook.Book passes: Run calls
// it with a constructor, for Memory and for a Follower over the leader's
// Handler.
package linkbooktest
