# Offline stand-in for @rules_cc (Bazel 4.2 asks for it; the network is not reachable): each rule
# forwards to the native one.
def cc_library(**a):
    native.cc_library(**a)

def cc_binary(**a):
    native.cc_binary(**a)

def cc_test(**a):
    native.cc_test(**a)

def cc_import(**a):
    native.cc_import(**a)

def cc_proto_library(**a):
    native.cc_proto_library(**a)

def fdo_prefetch_hints(**a):
    native.fdo_prefetch_hints(**a)

def fdo_profile(**a):
    native.fdo_profile(**a)

def cc_toolchain(**a):
    native.cc_toolchain(**a)

def cc_toolchain_suite(**a):
    native.cc_toolchain_suite(**a)

def objc_library(**a):
    native.objc_library(**a)

def objc_import(**a):
    native.objc_import(**a)
