/* CUDA driver stub for running libproton's instrumentation decoder host-only:
   "device" pointers are host pointers, copies are memcpy, streams are dummies. */
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
int cuInit(unsigned f){return 0;}
int cuCtxGetCurrent(void**c){*c=0;return 0;}
int cuCtxGetDevice(int*d){*d=0;return 0;}
int cuCtxSynchronize(void){return 0;}
int cuDeviceGet(int*d,int o){*d=o;return 0;}
int cuDeviceGetCount(int*n){*n=0;return 0;}
int cuDeviceGetAttribute(int*v,int a,int d){*v=0;return 0;}
int cuCtxGetStreamPriorityRange(int*l,int*g){*l=0;*g=0;return 0;}
int cuStreamSynchronize(void*s){return 0;}
int cuStreamCreateWithPriority(void**s,unsigned f,int p){*s=(void*)0x1;return 0;}
int cuStreamDestroy_v2(void*s){return 0;}
int cuMemAllocHost_v2(void**p,size_t n){*p=malloc(n?n:1);return 0;}
int cuMemHostAlloc(void**p,size_t n,unsigned f){*p=malloc(n?n:1);return 0;}
int cuMemFreeHost(void*p){free(p);return 0;}
int cuMemAlloc_v2(uint64_t*p,size_t n){*p=(uint64_t)(uintptr_t)malloc(n?n:1);return 0;}
int cuMemFree_v2(uint64_t p){free((void*)(uintptr_t)p);return 0;}
int cuMemHostGetDevicePointer_v2(uint64_t*d,void*h,unsigned f){*d=(uint64_t)(uintptr_t)h;return 0;}
int cuMemcpyDtoHAsync_v2(void*dst,uint64_t src,size_t n,void*s){memcpy(dst,(void*)(uintptr_t)src,n);return 0;}
int cuMemsetD32Async(uint64_t d,unsigned v,size_t n,void*s){uint32_t*p=(uint32_t*)(uintptr_t)d;for(size_t i=0;i<n;i++)p[i]=v;return 0;}
int cuLaunchKernel(){return 0;}
