//go:build !race

package lwtest

const raceEnabled = false
