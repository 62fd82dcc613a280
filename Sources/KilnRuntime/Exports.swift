@_exported import KilnFormat
