//go:build !conformance

package frontend

// registerFixtures is empty in production: the conformance fixtures exist
// only in a build with the conformance tag.
func registerFixtures(*Server) {}
