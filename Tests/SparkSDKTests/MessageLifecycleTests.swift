import Foundation
import Testing

@testable import SparkSDK

/// The message lifecycle as explicit transitions: every step names the states it moves a message
/// from, and a step from anywhere else moves nothing.
@Suite("Messaging: the message lifecycle")
struct MessageLifecycleTests {
    static let states: [MessageState] = [.sending, .held, .sent, .delivered, .read, .failed(reason: "no")]

    @Test func eachStepMovesOnlyFromItsSources() {
        let allowed: [(MessageStep, MessageState, MessageState)] = [
            (.release, .held, .sending), (.hold, .sending, .held), (.accept, .sending, .sent),
            (.refuse(reason: "too large"), .sending, .failed(reason: "too large")), (.deliver, .sent, .delivered),
            (.read, .delivered, .read),
        ]
        for (step, from, to) in allowed {
            #expect(from.after(step) == to, "\(step) from \(from)")
            for other in Self.states where other.storedName != from.storedName {
                #expect(other.after(step) == nil, "\(step) must not move a message that is \(other)")
            }
        }
    }

    @Test func nothingLeavesReadOrFailed() {
        for step in [MessageStep.release, .hold, .accept, .refuse(reason: "x"), .deliver, .read] {
            #expect(MessageState.read.after(step) == nil)
            #expect(MessageState.failed(reason: "no").after(step) == nil)
        }
    }

    @Test func statesRoundTripThroughTheStore() {
        for state in Self.states {
            let reason: String? = if case .failed(let reason) = state { reason } else { nil }
            #expect(MessageState(storedName: state.storedName, failure: reason) == state)
        }
        // A name this code never writes is a failure, never a state that would send or count as read.
        #expect(MessageState(storedName: "sent-ish", failure: nil) == .failed(reason: "failed"))
    }
}
