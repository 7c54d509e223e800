// Journal MESSAGE_IDs, one per outcome, so operators can `journalctl MESSAGE_ID=...` across a fleet.
// Listed in unbounded-nvidia-setup(8) and unbounded-nvidia-license-reload(8) (man/); never change a value
// once shipped.
#pragma once

namespace unbounded::message_id {

inline constexpr const char *SETUP_READY = "a22c5f0c72d0426dbccb8b3dbb5eb396";
inline constexpr const char *SETUP_FAILED = "59a6c10a04f94e3c9b5851e03f3004f7";
// A refresh (the path unit, the timer, the host) that failed: the machine keeps what it had.
inline constexpr const char *REFRESH_FAILED = "0e5c9147dad245b8a13814a30adddc74";
// cleanup could not remove a spec of ours (a CPU machine may then offer devices that are gone).
inline constexpr const char *CLEANUP_FAILED = "b8ff63520feb4717b5de6332a234e142";
// generate-cdi could not make or write the spec it was asked for.
inline constexpr const char *GENERATE_CDI_FAILED = "2e777899f05f402ca0cff71d22b80039";
// What a failed boot setup held back (containerd, kubelet), started by a refresh that made the root
// ready (setup/self_repair.hpp), or that start failing.
inline constexpr const char *SELF_REPAIRED = "0336e6fed63b469aac716429d562c391";
inline constexpr const char *SELF_REPAIR_FAILED = "7e39faa047ff49eca7ddc228d9007cbe";
inline constexpr const char *SETUP_NO_GPU = "cda7a464edbe433bb00a6bce0e98cb15";
inline constexpr const char *VERIFY_FAILED = "b4e8983344df4099a49b91cf59d15fea";
inline constexpr const char *DRIVER_PENDING_HOST_REBOOT = "c59eebb3050a4e278dde231d1bee3359";
inline constexpr const char *STAGING_INCONSISTENT = "ac460b93220244bcb78dd8ef0f16255a";
inline constexpr const char *STAGING_GONE = "6817338ae88a4d81809ca2be1684c8ed";
inline constexpr const char *DEVICE_PLUGIN_SPEC_STALE = "4252506b9900449893298fe44cb51b97";
inline constexpr const char *GPUS_MISSING = "fc3bdc73fbca4526b7eabc9a8803ef4b";
inline constexpr const char *CDI_SPEC_REMOVED = "d35cfe781ba94c2293fcd820d99139ae";
inline constexpr const char *LICENSE_APPLIED = "bcafdef73f1d4c3aba44e70fd75ca0d6";
inline constexpr const char *LICENSE_ROLLED_BACK = "60946feb744847e99a94e6d6a04d7df9";
inline constexpr const char *LICENSE_FAILED = "9628df5a7bc046b99b9ed4dc36ba15a6";
inline constexpr const char *LICENSE_REBOOT_REQUIRED = "af0191fdd289408da9b54124a5c39df0";
// What the machine's container runtime will do with our specs (lib/consumer/consumer_check.hpp).
inline constexpr const char *CONTAINERD_CDI_OFF = "e65de5f20dc342469402381e78c24cc1";
inline constexpr const char *CDI_VERSION_REFUSED = "f7bdc2d4002e4779907f0b8d59ef9662";
inline constexpr const char *CDI_SPEC_SHADOWED = "c8fdcdb042c947a0b4f51bc3dfe48bc5";
inline constexpr const char *DRA_CLAIM_SPEC_STALE = "ca4f2b522335499d8673c32f16a7b3a3";
inline constexpr const char *CONTAINERD_CONFIG_UNKNOWN = "c9b01f03c7b7455f8a9bdeea4f62e074";
// nvidia-container-runtime's configuration gives NVIDIA_VISIBLE_DEVICES a spec other than ours (a warning).
inline constexpr const char *NVIDIA_RUNTIME_NOT_OURS = "ef766c6f35c34f3c8eab66f2189418af";
// What the GPU consumers see changed (setup, refresh), and their restarts (unbounded-nvidia-consumers).
inline constexpr const char *DRIVER_GENERATION_CHANGED = "88c4fd6b474a402d8645cb4b341cba55";
inline constexpr const char *CONSUMER_RESTARTED = "cb34b1a11dcd42bda5a61517f359ebfb";
inline constexpr const char *CONSUMER_NOT_BACK = "8051bff0607b4ffe84e8d5d408434f70";
inline constexpr const char *CONSUMERS_RUNTIME_UNREACHABLE = "3f580689fc3f47f7bf78a40c97a64046";
// nvidia-gridd's license state, logged by the reloader when it changes (license_state.hpp).
inline constexpr const char *LICENSE_ACQUIRED = "1ffeb0bd3c444ea7a8826604fb437cd2";
inline constexpr const char *LICENSE_NOT_ACQUIRED = "3287c0ed1ead40f7a65c4c30fa39ca8e";
inline constexpr const char *LICENSE_PENDING = "d070255f69604d838112fbf343ba872d";
inline constexpr const char *LICENSE_STATE_UNKNOWN = "03ce822d9b7b4d55b912d577223ee0cc";

}  // namespace unbounded::message_id
