//! The headless `--consume copy` of a shared buffer, done by a compute
//! shader (shaders/copy.wgsl) on a queue that has compute. NVIDIA's
//! `vkCmdCopyBuffer` moves a large frame at about a third of the rate of a
//! shader's loads and stores on the same queue (docs/results/2026-11-25-shader-copy/README.md, "A
//! shader copy"); a transfer-only queue keeps `vkCmdCopyBuffer`.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;

use crate::frames::gpu::storage_buffer_range;
use vkcuda::interop::Use;
use vkcuda::vk::device::Device;
use vkcuda::vk::shared_buffer::SharedBuffer;

const SPIRV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/copy.spv"));

/// The shader's workgroup size (`@workgroup_size` in shaders/copy.wgsl).
const GROUP: u64 = 256;

/// The bindings: source and target, as 16-byte and as 4-byte elements.
const BINDINGS: [u32; 4] = [0, 1, 2, 3];

/// The stage and access of the shader's reads of the source.
pub const SHADER_R: Use = (vk::PipelineStageFlags2::COMPUTE_SHADER, vk::AccessFlags2::SHADER_STORAGE_READ);
/// The stage and access of the shader's writes to the target.
pub const SHADER_W: Use = (vk::PipelineStageFlags2::COMPUTE_SHADER, vk::AccessFlags2::SHADER_STORAGE_WRITE);

/// The copy's pipeline and one descriptor set per shared buffer it copies from.
pub struct ShaderCopy {
    device: Arc<Device>,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    /// Null until [`ShaderCopy::bind`]; remade by each bind.
    pool: vk::DescriptorPool,
    /// Each bound shared buffer and the set that copies it into the target.
    sets: Vec<(vk::Buffer, vk::DescriptorSet)>,
}

impl ShaderCopy {
    /// The copy for frames of `bytes` bytes, or `None` where a shader cannot
    /// do it: the device's queue has no compute, or the frame is larger than
    /// a storage buffer may be.
    pub fn new(device: Arc<Device>, bytes: u64) -> Result<Option<Self>> {
        // SAFETY: the instance and the physical device are live (the device holds them).
        let families =
            unsafe { device.instance().get_physical_device_queue_family_properties(device.info().physical) };
        let compute = families
            .get(device.queue_family() as usize)
            .is_some_and(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE));
        if !compute || bytes > storage_buffer_range(&device) || bytes % 4 != 0 {
            return Ok(None);
        }
        let mut this = Self {
            device,
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            pool: vk::DescriptorPool::null(),
            sets: Vec::new(),
        };
        // On an error, Drop destroys what was made.
        this.create_layouts()?;
        this.pipeline = this.create_pipeline()?;
        Ok(Some(this))
    }

    fn create_layouts(&mut self) -> Result<()> {
        let dev = &self.device.raw();
        let bindings = BINDINGS.map(|binding| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(binding)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        });
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: valid create info; destroyed in Drop.
        self.set_layout = unsafe { dev.create_descriptor_set_layout(&info, None) }?;
        let set_layouts = [self.set_layout];
        let push = [vk::PushConstantRange::default().stage_flags(vk::ShaderStageFlags::COMPUTE).size(8)];
        let info =
            vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(&push);
        // SAFETY: valid create info; destroyed in Drop.
        self.layout = unsafe { dev.create_pipeline_layout(&info, None) }?;
        Ok(())
    }

    fn create_pipeline(&self) -> Result<vk::Pipeline> {
        let dev = &self.device.raw();
        let code = ash::util::read_spv(&mut std::io::Cursor::new(SPIRV)).context("reading copy.spv")?;
        // SAFETY: SPIR-V produced and validated by naga at build time.
        let module =
            unsafe { dev.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None) }?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"copy");
        let info = vk::ComputePipelineCreateInfo::default().stage(stage).layout(self.layout);
        // SAFETY: every pointer in `info` points into locals that outlive the call.
        let pipelines = unsafe { dev.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) };
        // SAFETY: the module is only needed while the pipeline is created.
        unsafe { dev.destroy_shader_module(module, None) };
        Ok(pipelines.map_err(|(_, e)| e).context("creating the copy pipeline")?[0])
    }

    /// Points the copy at a new session's shared buffers and `target` (the
    /// queue is idle: interop rebuilds drain first).
    pub fn bind(&mut self, sources: &[SharedBuffer], target: vk::Buffer) -> Result<()> {
        let dev = &self.device.raw();
        self.sets.clear();
        // SAFETY: the queue is idle, so no pending command buffer uses the pool's sets.
        unsafe { dev.destroy_descriptor_pool(self.pool, None) };
        self.pool = vk::DescriptorPool::null();
        if sources.is_empty() {
            return Ok(());
        }
        let n = sources.len() as u32;
        let sizes =
            [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: 4 * n }];
        let info = vk::DescriptorPoolCreateInfo::default().max_sets(n).pool_sizes(&sizes);
        // SAFETY: valid create info; destroyed by the next bind or in Drop.
        self.pool = unsafe { dev.create_descriptor_pool(&info, None) }?;
        let layouts = vec![self.set_layout; sources.len()];
        let alloc = vk::DescriptorSetAllocateInfo::default().descriptor_pool(self.pool).set_layouts(&layouts);
        // SAFETY: the pool has room for one set per source.
        let sets = unsafe { dev.allocate_descriptor_sets(&alloc) }?;
        for (source, set) in sources.iter().zip(sets) {
            let from = [vk::DescriptorBufferInfo::default().buffer(source.buffer()).range(vk::WHOLE_SIZE)];
            let to = [vk::DescriptorBufferInfo::default().buffer(target).range(vk::WHOLE_SIZE)];
            let writes = BINDINGS.map(|binding| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(binding)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(if binding % 2 == 0 { &from } else { &to })
            });
            // SAFETY: a new set; the buffers are live.
            unsafe { dev.update_descriptor_sets(&writes, &[]) };
            self.sets.push((source.buffer(), set));
        }
        Ok(())
    }

    /// Records a copy of `bytes` bytes of `source` (bound) into the target:
    /// the caller orders it after the target's last use ([`SHADER_W`]).
    pub fn record(&self, cmd: vk::CommandBuffer, source: vk::Buffer, bytes: u64) -> Result<()> {
        let dev = &self.device.raw();
        let set = self
            .sets
            .iter()
            .find(|(b, _)| *b == source)
            .map(|(_, s)| *s)
            .ok_or_else(|| anyhow!("shared buffer not bound to the copy"))?;
        let (Ok(quads), Ok(words)) = (u32::try_from(bytes / 16), u32::try_from(bytes / 4)) else {
            bail!("a {bytes}-byte frame is too large for the shader copy");
        };
        let groups = u64::from(quads).div_ceil(GROUP).clamp(1, 65_535) as u32;
        let mut span = [0u8; 8];
        span[..4].copy_from_slice(&quads.to_ne_bytes());
        span[4..].copy_from_slice(&words.to_ne_bytes());
        let compute = vk::PipelineBindPoint::COMPUTE;
        // Recording into `cmd`; the pipeline, its layout and the set are live.
        // SAFETY: as above.
        unsafe { dev.cmd_bind_pipeline(cmd, compute, self.pipeline) };
        // SAFETY: as above; the set matches the layout.
        unsafe { dev.cmd_bind_descriptor_sets(cmd, compute, self.layout, 0, &[set], &[]) };
        // SAFETY: as above; 8 bytes, the layout's range.
        unsafe { dev.cmd_push_constants(cmd, self.layout, vk::ShaderStageFlags::COMPUTE, 0, &span) };
        // SAFETY: as above; at most 65,535 groups (every device's limit).
        unsafe { dev.cmd_dispatch(cmd, groups, 1, 1) };
        Ok(())
    }
}

impl Drop for ShaderCopy {
    fn drop(&mut self) {
        let dev = &self.device.raw();
        // The owner waited for the queue; the objects are ours (null ones are ignored).
        // SAFETY: as above; the sets go with the pool.
        unsafe { dev.destroy_descriptor_pool(self.pool, None) };
        // SAFETY: as above.
        unsafe { dev.destroy_pipeline(self.pipeline, None) };
        // SAFETY: as above.
        unsafe { dev.destroy_pipeline_layout(self.layout, None) };
        // SAFETY: as above.
        unsafe { dev.destroy_descriptor_set_layout(self.set_layout, None) };
    }
}
