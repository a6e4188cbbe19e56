// Package floors holds no code: its test checks the shape of the house that
// no compiler checks (design.md, "Floors run one way"): which packages may
// import which, that nothing built is committed at the top of the
// repository, and that no Go file in internal/ outgrows 600 lines. It runs
// go list and git, and needs no guests.
package floors
