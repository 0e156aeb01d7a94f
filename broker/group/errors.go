package group

import "errors"

// Kafka protocol error codes the coordinator answers with.
const (
	codeNone                      int16 = 0
	codeUnknownServerError        int16 = -1
	codeUnknownTopicOrPartition   int16 = 3
	codeOffsetMetadataTooLarge    int16 = 12
	codeCoordinatorLoadInProgress int16 = 14
	codeCoordinatorNotAvailable   int16 = 15
	codeNotCoordinator            int16 = 16
	codeIllegalGeneration         int16 = 22
	codeInconsistentGroupProtocol int16 = 23
	codeInvalidGroupID            int16 = 24
	codeUnknownMemberID           int16 = 25
	codeInvalidSessionTimeout     int16 = 26
	codeRebalanceInProgress       int16 = 27
	codeInvalidCommitOffsetSize   int16 = 28
	codeUnsupportedVersion        int16 = 35
	codeInvalidRequest            int16 = 42
	codeNonEmptyGroup             int16 = 68
	codeGroupIDNotFound           int16 = 69
	codeMemberIDRequired          int16 = 79
	codeGroupMaxSizeReached       int16 = 81
	codeFencedInstanceID          int16 = 82
	codeGroupSubscribedToTopic    int16 = 86
	codeUnstableOffsetCommit      int16 = 88
	codeUnknownTopicID            int16 = 100
)

// appendErrorCode maps a failed append to __consumer_offsets to the code a
// client sees, as Kafka does: a lost leadership sends the client to find the
// coordinator again, an oversized commit is the client's fault, anything
// else (timeouts, not enough replicas, I/O) is a retriable unavailability.
func appendErrorCode(err error) int16 {
	switch {
	case errors.Is(err, ErrNotLeader):
		return codeNotCoordinator
	case errors.Is(err, ErrRecordTooLarge):
		return codeInvalidCommitOffsetSize
	default:
		return codeCoordinatorNotAvailable
	}
}
