//go:build race

package bot_test

// raceDetector tells whether the tests run under the race detector, which
// makes the bot's byte-by-byte work on output many times slower.
const raceDetector = true
