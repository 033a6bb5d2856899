# Offline stand-in for @rules_java: each rule forwards to the native one.
def java_binary(**a):
    native.java_binary(**a)

def java_import(**a):
    native.java_import(**a)

def java_library(**a):
    native.java_library(**a)

def java_lite_proto_library(**a):
    native.java_lite_proto_library(**a)

def java_proto_library(**a):
    native.java_proto_library(**a)

def java_test(**a):
    native.java_test(**a)

def java_package_configuration(**a):
    native.java_package_configuration(**a)

def java_plugin(**a):
    native.java_plugin(**a)

def java_runtime(**a):
    native.java_runtime(**a)

def java_toolchain(**a):
    native.java_toolchain(**a)
