// Package testing holds builders of API objects for tests, in the style of
// Kueue's wrappers: MakeShellJob(name, ns).Pool("p").Obj().
package testing
