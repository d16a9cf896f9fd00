//go:build race

package bot_test

// raceDetector tells whether the tests run under the race detector.
const raceDetector = true
