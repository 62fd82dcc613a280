import Foundation
import KilnFormat
import KilnONNX
import KilnReference
import KilnTestSupport
import XCTest

let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0 ..< 3 { url.deleteLastPathComponent() }
    return url.path
}()

let sharedModels = testModels
