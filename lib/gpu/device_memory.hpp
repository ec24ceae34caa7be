// RAII owners for device memory, streams and events.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>
#include <utility>

#include "gpu/cuda_check.hpp"
#include "sweep/buffer_roles.hpp"

namespace attnprof {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `role` names what the buffer holds ("scores", "workspace", ...) for the memory records of its
  // allocation (sweep/buffer_roles.hpp); unnamed buffers count as "other".
  explicit DeviceBuffer(std::size_t bytes, std::string_view role = {}) : bytes_(bytes) {
    if (bytes > 0) {
      CUDA_CHECK(cudaMalloc(&ptr_, bytes));
      note_buffer_role(ptr_, bytes, role);
    }
  }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

  // Grows (never shrinks) to at least `bytes`; contents are not kept.
  void reserve(std::size_t bytes, std::string_view role = {}) {
    if (bytes > bytes_) *this = DeviceBuffer(bytes, role);
  }

 private:
  void release() noexcept {
    if (ptr_ != nullptr) cudaFree(ptr_);  // errors at teardown have nowhere to go
    ptr_ = nullptr;
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class CudaStream {
 public:
  CudaStream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() { CUDA_CHECK(cudaEventCreate(&event_)); }
  ~CudaEvent() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Milliseconds between two recorded events (both must have completed).
float elapsed_ms(const CudaEvent& start, const CudaEvent& stop);

}  // namespace attnprof
